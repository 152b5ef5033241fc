"""A tiny client of the generation service, written against the Python code
generated from proto/ by grpcio-tools (into gen/ beside this file) and grpcio,
over plaintext HTTP/2 (the core port speaks h2c).

Configuration, from the environment only:
  GENERATION_ADDRESS  the core port, "host:port" or "http://host:port" (for example 127.0.0.1:8081)
  GENERATION_API_KEY  an API key of your account

It creates an image job, polls it until it is done or failed, reads the
balance, and streams a text answer. It exits with 1 on any failure, 2 when
misconfigured.
"""

import os
import sys
import time
import uuid

import grpc

# The generated modules import each other as `generation.v1.*`: gen/ is their root.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))
from generation.v1 import generation_service_pb2, generation_service_pb2_grpc, job_pb2  # noqa: E402
from generation.v1 import text_service_pb2, text_service_pb2_grpc  # noqa: E402

IMAGE_MODEL = "aimodel-3-pro-image"
TEXT_MODEL = "aimodel-3.5-flash"
TEXT_PROMPT = "Write a haiku about tides"
JOB_DEADLINE_SECONDS = 120  # how long the job may take before this client gives up
POLL_INTERVAL_SECONDS = 0.25
CALL_TIMEOUT_SECONDS = 30  # bound of each RPC


def required(name):
    value = os.environ.get(name)
    if not value:
        print(f"{name} is not set (GENERATION_ADDRESS=host:port of the core, GENERATION_API_KEY=your key)", file=sys.stderr)
        sys.exit(2)
    return value


def status_name(status):
    """"queued", "processing", "done", "failed"."""
    return job_pb2.JobStatus.Name(status).removeprefix("JOB_STATUS_").lower()


class Failure(Exception):
    pass


def run(address, api_key):
    # grpcio wants "host:port"; the core port is plaintext HTTP/2.
    target = address.removeprefix("http://")
    # Every call carries the key; the service reads it from `authorization: Bearer`.
    auth = (("authorization", f"Bearer {api_key}"),)
    with grpc.insecure_channel(target) as channel:
        generation = generation_service_pb2_grpc.GenerationServiceStub(channel)
        text = text_service_pb2_grpc.TextServiceStub(channel)
        print(f"service: {target} (gRPC over HTTP/2)")

        # 1. An image job. The idempotency key makes a retry of this call safe.
        created = generation.CreateGeneration(
            generation_service_pb2.CreateGenerationRequest(
                model=IMAGE_MODEL,
                prompt="a lighthouse at dusk",
                aspect_ratio="1:1",
                resolution="1K",
                idempotency_key=str(uuid.uuid4()),
            ),
            metadata=auth,
            timeout=CALL_TIMEOUT_SECONDS,
        )
        print(f"created image job {created.job_id} ({IMAGE_MODEL}, 1:1, 1K): {status_name(created.status)}")

        # 2. Poll until it is finished, printing each change of status.
        terminal = (job_pb2.JOB_STATUS_DONE, job_pb2.JOB_STATUS_FAILED)
        last = created.status
        deadline = time.monotonic() + JOB_DEADLINE_SECONDS
        while True:
            job = generation.GetJob(
                generation_service_pb2.GetJobRequest(job_id=created.job_id), metadata=auth, timeout=CALL_TIMEOUT_SECONDS
            ).job
            if job.status in terminal:
                break
            if job.status != last:
                print(f"job {job.job_id}: {status_name(job.status)}")
            last = job.status
            if time.monotonic() > deadline:
                raise Failure(f"job {job.job_id} still {status_name(job.status)} after {JOB_DEADLINE_SECONDS} s")
            time.sleep(POLL_INTERVAL_SECONDS)
        if job.status == job_pb2.JOB_STATUS_FAILED:
            raise Failure(f"job {job.job_id}: failed, {job.error}: {job.error_message}")
        print(f"job {job.job_id}: done, charged {job.usage.charged} USD, {job.result.mime_type} at {job.result.image_url}")

        # 3. The balance, now that the job is settled.
        balance = generation.GetBalance(
            generation_service_pb2.GetBalanceRequest(), metadata=auth, timeout=CALL_TIMEOUT_SECONDS
        ).balance
        print(f"balance: {balance.balance} {balance.currency} (reserved {balance.reserved}, available {balance.available})")

        # 4. A streamed text answer, printed as it arrives; the last chunk carries the charged usage.
        print(f'streaming {TEXT_MODEL}: "{TEXT_PROMPT}"')
        request = text_service_pb2.StreamGenerateContentRequest(
            request=text_service_pb2.GenerateContentRequest(
                model=TEXT_MODEL,
                contents=[text_service_pb2.Content(role="user", parts=[text_service_pb2.Part(text=TEXT_PROMPT)])],
            )
        )
        chunks = prompt_tokens = output_tokens = 0
        for response in text.StreamGenerateContent(request, metadata=auth, timeout=CALL_TIMEOUT_SECONDS):
            chunk = response.chunk
            chunks += 1
            for candidate in chunk.candidates[:1]:
                for part in candidate.content.parts:
                    if part.HasField("text") and not part.thought:
                        print(part.text, end="", flush=True)
            if chunk.HasField("usage_metadata"):
                prompt_tokens = chunk.usage_metadata.prompt_token_count or prompt_tokens
                output_tokens = chunk.usage_metadata.candidates_token_count or output_tokens
        print()
        print(f"streamed {chunks} chunks; usage: {prompt_tokens} prompt + {output_tokens} output tokens")


def main():
    address = required("GENERATION_ADDRESS")
    api_key = required("GENERATION_API_KEY")
    try:
        run(address, api_key)
    except grpc.RpcError as error:
        print(f"failed: {error.code().name} {error.details()}", file=sys.stderr)
        sys.exit(1)
    except Failure as error:
        print(f"failed: {error}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
