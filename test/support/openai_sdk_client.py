"""OpenAI's official Python SDK (openai) as a user configures it.

Run by test/transport/openai-sdk-python.test.ts with the interpreter of the venv
infra/python-sdk.sh makes. The client gets nothing but a base URL and a key:

    OpenAI(api_key=KEY, base_url=URL)

Usage: openai_sdk_client.py SCENARIO MODEL [PROMPT]
  with OPENAI_SDK_BASE_URL and OPENAI_SDK_API_KEY in the environment.
Scenarios: unary, stream, json, image, image_link (PROMPT is the image's URL), images, list, tools.
Prints one JSON object on stdout: what the SDK handed back, or
{"error": {...}} with the SDK's APIStatusError (class, status, type, code, param, message).
"""

import json
import os
import sys

import openai
from openai import OpenAI

# A 1x1 PNG as a data URI.
PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def usage_of(usage):
    if usage is None:
        return None
    details = usage.completion_tokens_details
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
        "reasoning_tokens": details.reasoning_tokens if details else None,
    }


def completion_of(completion):
    choice = completion.choices[0]
    calls = choice.message.tool_calls or []
    return {
        "id": completion.id,
        "object": completion.object,
        "model": completion.model,
        "content": choice.message.content,
        "finish_reason": choice.finish_reason,
        "tool_calls": [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in calls],
        "usage": usage_of(completion.usage),
    }


def run(client, scenario, model, prompt):
    user = [{"role": "user", "content": prompt}]
    if scenario == "unary":
        return completion_of(client.chat.completions.create(model=model, messages=user))
    if scenario == "stream":
        chunks = []
        stream = client.chat.completions.create(model=model, messages=user, stream=True, stream_options={"include_usage": True})
        for chunk in stream:
            chunks.append({
                "id": chunk.id,
                "content": [c.delta.content for c in chunk.choices],
                "finish_reason": [c.finish_reason for c in chunk.choices],
                "usage": usage_of(chunk.usage),
            })
        return {"chunks": chunks}
    if scenario == "json":
        return completion_of(client.chat.completions.create(model=model, messages=user, response_format={"type": "json_object"}))
    if scenario == "image":
        content = [{"type": "text", "text": prompt}, {"type": "image_url", "image_url": {"url": PNG}}]
        return completion_of(client.chat.completions.create(model=model, messages=[{"role": "user", "content": content}]))
    if scenario == "image_link":
        content = [{"type": "text", "text": "What is in this picture?"}, {"type": "image_url", "image_url": {"url": prompt}}]
        return completion_of(client.chat.completions.create(model=model, messages=[{"role": "user", "content": content}]))
    if scenario == "images":
        images = client.images.generate(model=model, prompt=prompt, size="1024x1024", response_format="b64_json")
        return {"images": [{"b64_json": image.b64_json, "url": image.url} for image in images.data]}
    if scenario == "list":
        return {"models": [{"id": m.id, "object": m.object, "owned_by": m.owned_by} for m in client.models.list()]}
    if scenario == "tools":
        first = client.chat.completions.create(model=model, messages=user, tools=[WEATHER], tool_choice="auto")
        message = first.choices[0].message
        if not message.tool_calls:
            return {"first": completion_of(first)}
        call = message.tool_calls[0]
        history = user + [message, {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temperature_c": 14})}]
        second = client.chat.completions.create(model=model, messages=history, tools=[WEATHER])
        return {"first": completion_of(first), "second": completion_of(second)}
    raise SystemExit(f"unknown scenario {scenario}")


def main():
    scenario, model = sys.argv[1], sys.argv[2]
    prompt = sys.argv[3] if len(sys.argv) > 3 else ""
    client = OpenAI(api_key=os.environ["OPENAI_SDK_API_KEY"], base_url=os.environ["OPENAI_SDK_BASE_URL"], max_retries=0)
    try:
        result = run(client, scenario, model, prompt)
    except openai.APIStatusError as error:
        body = error.body if isinstance(error.body, dict) else {}
        result = {"error": {
            "class": type(error).__name__,
            "status": error.status_code,
            "type": body.get("type"),
            "code": error.code,
            "param": error.param,
            "message": error.message,
        }}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
