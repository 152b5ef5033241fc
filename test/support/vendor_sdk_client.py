"""The vendor's official Python SDK (google-genai) as a user configures it.

Run by test/transport/vendor-sdk-python.test.ts with the interpreter of the venv
infra/python-sdk.sh makes. The client gets nothing but a base URL and a key:

    genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=URL))

Usage: vendor_sdk_client.py SCENARIO MODEL [PROMPT]
  with VENDOR_SDK_BASE_URL and VENDOR_SDK_API_KEY in the environment.
Scenarios: unary, stream, chat, count, list (PROMPT: the page size), get;
  functions (a function-calling round trip), safety, thinking (a budget, no
  max_output_tokens), json (a response schema).
Prints one JSON object on stdout: what the SDK handed back, or
{"error": {...}} with the SDK's APIError (class, code, status, message).
"""

import json
import os
import sys

from google import genai
from google.genai import errors, types


def usage_of(response):
    usage = response.usage_metadata
    if usage is None:
        return None
    return {
        "prompt_token_count": usage.prompt_token_count,
        "candidates_token_count": usage.candidates_token_count,
        "total_token_count": usage.total_token_count,
        "thoughts_token_count": usage.thoughts_token_count,
    }


def answer_of(response):
    candidates = response.candidates or []
    feedback = response.prompt_feedback
    return {
        "text": response.text,
        "finish_reason": candidates[0].finish_reason.value if candidates and candidates[0].finish_reason else None,
        "candidates": len(candidates),
        "block_reason": feedback.block_reason.value if feedback and feedback.block_reason else None,
        "usage": usage_of(response),
    }


WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="The current weather of a city",
    parameters=types.Schema(
        type="OBJECT",
        properties={"city": types.Schema(type="STRING"), "unit": types.Schema(type="STRING", enum=["celsius", "fahrenheit"])},
        required=["city", "unit"],
    ),
)


def parts_of(response):
    content = response.candidates[0].content if response.candidates else None
    return [
        {
            "text": part.text,
            "thought": bool(part.thought),
            "function_call": {"id": part.function_call.id, "name": part.function_call.name, "args": part.function_call.args}
            if part.function_call
            else None,
        }
        for part in (content.parts if content and content.parts else [])
    ]


def functions(client, model, prompt):
    """Declares a function; answers the model's call with its result; returns both turns."""
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[WEATHER])],
        tool_config=types.ToolConfig(function_calling_config=types.FunctionCallingConfig(mode="AUTO")),
    )
    question = types.Content(role="user", parts=[types.Part(text=prompt)])
    first = client.models.generate_content(model=model, contents=[question], config=config)
    call = first.function_calls[0]
    result = types.Part(function_response=types.FunctionResponse(id=call.id, name=call.name, response={"output": "18 degrees"}))
    history = [question, first.candidates[0].content, types.Content(role="user", parts=[result])]
    second = client.models.generate_content(model=model, contents=history, config=config)
    return {"turns": [{**answer_of(r), "parts": parts_of(r)} for r in (first, second)]}


def model_of(model):
    return {
        "name": model.name,
        "display_name": model.display_name,
        "description": model.description,
        "version": model.version,
        "input_token_limit": model.input_token_limit,
        "output_token_limit": model.output_token_limit,
        "supported_actions": model.supported_actions,
    }


def run(client, scenario, model, prompt):
    if scenario == "unary":
        return answer_of(client.models.generate_content(model=model, contents=prompt))
    if scenario == "stream":
        return {"chunks": [answer_of(chunk) for chunk in client.models.generate_content_stream(model=model, contents=prompt)]}
    if scenario == "chat":
        chat = client.chats.create(model=model)
        first = chat.send_message(prompt)
        second = chat.send_message("And once more, shorter.")
        history = [
            {"role": content.role, "text": "".join(part.text or "" for part in content.parts or [])}
            for content in chat.get_history()
        ]
        return {"answers": [answer_of(first), answer_of(second)], "history": history}
    if scenario == "count":
        return {"total_tokens": client.models.count_tokens(model=model, contents=prompt).total_tokens}
    if scenario == "list":
        pager = client.models.list(config=types.ListModelsConfig(page_size=int(prompt)))
        pages = [[m.name for m in pager.page]]
        while True:
            try:
                pages.append([m.name for m in pager.next_page()])
            except IndexError:  # the pager's way of saying there is no next page
                break
        every = [m.name for m in client.models.list(config=types.ListModelsConfig(page_size=int(prompt)))]
        return {"pages": pages, "all": every}
    if scenario == "get":
        return model_of(client.models.get(model=model))
    if scenario == "functions":
        return functions(client, model, prompt)
    if scenario == "safety":
        settings = [
            types.SafetySetting(category="HARM_CATEGORY_HARASSMENT", threshold="BLOCK_ONLY_HIGH"),
            types.SafetySetting(category="HARM_CATEGORY_DANGEROUS_CONTENT", threshold="BLOCK_NONE"),
        ]
        config = types.GenerateContentConfig(safety_settings=settings)
        return answer_of(client.models.generate_content(model=model, contents=prompt, config=config))
    if scenario == "thinking":
        config = types.GenerateContentConfig(thinking_config=types.ThinkingConfig(thinking_budget=1024, include_thoughts=True))
        response = client.models.generate_content(model=model, contents=prompt, config=config)
        return {**answer_of(response), "parts": parts_of(response)}
    if scenario == "json":
        schema = types.Schema(
            type="OBJECT",
            properties={"name": types.Schema(type="STRING"), "rank": types.Schema(type="INTEGER", minimum=3)},
            required=["name", "rank"],
        )
        config = types.GenerateContentConfig(response_mime_type="application/json", response_schema=schema)
        return answer_of(client.models.generate_content(model=model, contents=prompt, config=config))
    raise SystemExit(f"unknown scenario {scenario}")


def main():
    scenario, model = sys.argv[1], sys.argv[2]
    prompt = sys.argv[3] if len(sys.argv) > 3 else ""
    client = genai.Client(
        api_key=os.environ["VENDOR_SDK_API_KEY"],
        http_options=types.HttpOptions(base_url=os.environ["VENDOR_SDK_BASE_URL"]),
    )
    try:
        result = run(client, scenario, model, prompt)
    except errors.APIError as error:
        result = {
            "error": {
                "class": type(error).__name__,
                "code": error.code,
                "status": error.status,
                "message": error.message,
                "details": error.details,
            }
        }
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
