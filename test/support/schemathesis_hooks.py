"""Schemathesis hooks of the OpenAPI fuzz run (test/transport/openapi-fuzz.test.ts, infra/fuzz.sh).

Loaded with SCHEMATHESIS_HOOKS=test/support/schemathesis_hooks.py. They add one
check, `no_money_or_job_moved_by_an_error`: a request answered with an error
(status >= 400) must not have moved money or created a job. Around every call:

- before it, the run waits until nothing is in flight (the key's account has
  nothing reserved: every earlier job settled), so a balance can only move
  because of this very call; then it takes a snapshot: the key's account
  balance (GET /api/v1/balance), the balance of the account an admin call
  names in its path (GET /admin/v1/accounts/{id}/balance), and the number of
  jobs in the store;
- after it, when the answer is an error, the same snapshot again: it must be
  identical.

The run is sequential (workers = 1): a second worker's successful call would
move money between another call's two snapshots.

They also keep a journal (FUZZ_JOURNAL, JSON lines) of what moved money on
purpose: accounts created with their opening balance, credits added, jobs
accepted, synchronous text calls with their usage, and the price list before
the first call and after every updatePrice (each text call is charged at the
prices then in force). The test replays it against the balances at the end
(balance = credits - charges, exactly). Every call is journaled too, with its
status, so the test can tell that every operation was exercised.

Pauses only ever resume (see _only_resume).

Environment: FUZZ_BASE_URL, FUZZ_API_KEY, FUZZ_KEY_ID (the key never revoked), FUZZ_ADMIN_TOKEN, FUZZ_JOURNAL, and
one way to count jobs: FUZZ_JOBS_URL (GET answers {"jobs": N}; the test serves
it for either backend) or FUZZ_SQLITE_DB (the embedded store's service.db,
opened read-only).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from typing import Any

import requests
import schemathesis

BASE_URL = os.environ["FUZZ_BASE_URL"].rstrip("/")
API_KEY = os.environ["FUZZ_API_KEY"]
FUZZ_KEY_ID = os.environ.get("FUZZ_KEY_ID", "")
ADMIN_TOKEN = os.environ["FUZZ_ADMIN_TOKEN"]
JOURNAL = os.environ["FUZZ_JOURNAL"]
JOBS_URL = os.environ.get("FUZZ_JOBS_URL")
SQLITE_DB = os.environ.get("FUZZ_SQLITE_DB")
# How long a call waits for earlier jobs to settle before it is sent.
QUIET_DEADLINE_S = float(os.environ.get("FUZZ_QUIET_DEADLINE_S", "60"))

# Operations whose 2xx answers move money or create work, by operationId.
JOB_CREATING = {
    "createGeneration",
    "createVideoInteraction",
    "textGenerations_aimodel_2_5_flash_image",
    "urlGenerations_aimodel_2_5_flash_image",
    "textGenerations_aimodel_3_1_flash_image",
    "urlGenerations_aimodel_3_1_flash_image",
    "textGenerations_aimodel_3_pro_image",
    "urlGenerations_aimodel_3_pro_image",
}
TEXT_CALLS = {"generateContent", "streamGenerateContent"}
# The OpenAI-compatible surface's text call: its usage is OpenAI's, journaled as the vendor's usageMetadata.
OPENAI_CHAT = "createChatCompletion"
# The OpenAI-compatible surface's images: one job per image, its ids not in the answer (the newest jobs are they).
OPENAI_IMAGES = "createImage"
PAUSES = {"setProjectPaused", "setModelPaused", "setRoutePaused"}

_session = requests.Session()
_lock = threading.Lock()
_local = threading.local()


def _operation_id(case: Any) -> str:
    return case.operation.definition.raw.get("operationId", "")


def _journal(entry: dict[str, Any]) -> None:
    with _lock, open(JOURNAL, "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")


def _get(path: str, token: str) -> requests.Response:
    return _session.get(BASE_URL + path, headers={"authorization": f"Bearer {token}"}, timeout=30)


def _job_count() -> int:
    if JOBS_URL:
        response = _session.get(JOBS_URL, timeout=30)
        response.raise_for_status()
        return int(response.json()["jobs"])
    if SQLITE_DB:
        # Read-only and never locking the service out: a plain reader of its WAL database.
        with sqlite3.connect(f"file:{SQLITE_DB}?mode=ro", uri=True, timeout=30) as db:
            return int(db.execute("SELECT count(*) FROM jobs").fetchone()[0])
    raise RuntimeError("set FUZZ_JOBS_URL or FUZZ_SQLITE_DB: the jobs must be counted")


def _key_balance() -> dict[str, str]:
    response = _get("/api/v1/balance", API_KEY)
    if response.status_code != 200:
        raise RuntimeError(f"the fuzz key's balance answered {response.status_code}: {response.text[:200]}")
    return response.json()


def _account_balance(account_id: str) -> dict[str, str] | None:
    """An account's balance by the admin API, or None when there is no such account."""
    if not account_id or "/" in account_id or "?" in account_id or "#" in account_id:
        return None
    try:
        response = _get(f"/admin/v1/accounts/{requests.utils.quote(account_id, safe='')}/balance", ADMIN_TOKEN)
    except requests.RequestException:
        return None
    return response.json() if response.status_code == 200 else None


def _named_account(case: Any) -> str | None:
    """The account an admin call names in its path, if any."""
    parameters = case.path_parameters or {}
    value = parameters.get("accountId")
    return value if isinstance(value, str) else None


def _wait_until_quiet(account_id: str | None) -> dict[str, str]:
    """Waits until nothing is reserved (every earlier job settled), returns the key's balance."""
    deadline = time.monotonic() + QUIET_DEADLINE_S
    while True:
        balance = _key_balance()
        named = _account_balance(account_id) if account_id else None
        if balance["reserved"] == "0.00" and (named is None or named["reserved"] == "0.00"):
            return balance
        if time.monotonic() > deadline:
            raise RuntimeError(f"money still reserved after {QUIET_DEADLINE_S} s: {balance} {named}")
        time.sleep(0.02)


def _only_resume(case: Any) -> None:
    """Pauses only ever resume: a paused project (or model, or route) answers 503 to everything after it,
    and the rest of the run would test nothing but that. Resuming exercises the same route, validation
    and answer schema. Done here, on the request about to be sent, so that no phase (explicit examples
    included) escapes it; bodies that are not an object with a boolean `paused` are sent as drawn."""
    if _operation_id(case) in PAUSES and isinstance(case.body, dict) and case.body.get("paused") is True:
        case.body = {**case.body, "paused": False}


def _keep_fuzz_key(case: Any) -> None:
    """The run's own key is never revoked or rotated: statements name it (key_id), and a stateful link
    from them to revokeApiKey or rotateApiKey (the old secret ends) would turn every call after it into
    a 401. Both are still exercised, on an id no key has (404 key_not_found)."""
    if _operation_id(case) in ("revokeApiKey", "rotateApiKey") and (case.path_parameters or {}).get("keyId") == FUZZ_KEY_ID:
        case.path_parameters = {**case.path_parameters, "keyId": "key_not_the_fuzz_key"}


def _snapshot(case: Any) -> dict[str, Any]:
    account_id = _named_account(case)
    return {
        "key_account": _key_balance(),
        "named_account": _account_balance(account_id) if account_id else None,
        "jobs": _job_count(),
    }


_prices_journaled = False


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    global _prices_journaled
    if not _prices_journaled:
        # The prices in force before the first call; updatePrice answers follow in the journal.
        _journal({"kind": "prices", "prices": _get("/admin/v1/prices", ADMIN_TOKEN).json()["prices"]})
        _prices_journaled = True
    _only_resume(case)
    _keep_fuzz_key(case)
    _wait_until_quiet(_named_account(case))
    _local.before = (case, _snapshot(case))


@schemathesis.hook
def after_call(context: Any, case: Any, response: Any) -> None:
    before = getattr(_local, "before", None)
    if before is None or before[0] is not case:
        return
    _local.before = None
    verdict = None
    # Every call, so the test can tell which operations were exercised and how many errors were compared.
    _journal({"kind": "call", "operation": _operation_id(case), "status": response.status_code})
    if response.status_code >= 400:
        verdict = (before[1], _snapshot(case))
    else:
        _record_success(case, response)
    # The check (below) runs on this response next, in this thread.
    _local.verdict = (response, verdict)


def _json(response: Any) -> Any:
    try:
        return json.loads(response.content)
    except ValueError:
        return None


def _replayed(response: Any) -> bool:
    """Whether the answer replays an earlier request with the same Idempotency-Key (header Idempotent-Replayed: true)."""
    headers = {str(name).lower(): value for name, value in dict(response.headers).items()}
    value = headers.get("idempotent-replayed")
    if isinstance(value, list):
        value = value[0] if value else None
    return value == "true"


def _record_success(case: Any, response: Any) -> None:
    operation = _operation_id(case)
    body = _json(response)
    # 202: accepted; 200: finished within Prefer: wait (the job itself).
    if operation in JOB_CREATING and response.status_code in (200, 202) and isinstance(body, dict):
        _journal({"kind": "job", "job_id": body["job_id"]})
    elif operation == "createAccount" and response.status_code == 201 and isinstance(body, dict):
        _journal({"kind": "account", "account_id": body["account_id"], "opening": body["balance"]})
    elif operation in ("addCredits", "adjustBalance") and _replayed(response):
        # A replay under its Idempotency-Key moved no money (decision 0039): the first answer was journaled.
        pass
    elif operation == "addCredits" and response.status_code == 200:
        _journal({"kind": "credit", "account_id": _named_account(case), "amount": case.body["amount"]})
    elif operation == "adjustBalance" and response.status_code == 201:
        # A signed amount: a debit adjustment lowers what the account was credited.
        _journal({"kind": "credit", "account_id": _named_account(case), "amount": case.body["amount"]})
    elif operation == "updatePrice" and response.status_code == 200 and isinstance(body, dict):
        _journal({"kind": "price", "price": body})
    elif operation in TEXT_CALLS and response.status_code == 200:
        entry = {"kind": "text_call", "model": case.path_parameters["model"], "chunks": _chunks(response, body)}
        # An image model's call is priced by the resolution it asked for (imageSize), not by tokens.
        config = case.body.get("generationConfig") if isinstance(case.body, dict) else None
        image_config = config.get("imageConfig") if isinstance(config, dict) else None
        if isinstance(image_config, dict) and isinstance(image_config.get("imageSize"), str):
            entry["image_size"] = image_config["imageSize"]
        _journal(entry)
    elif operation == OPENAI_IMAGES and response.status_code == 200 and isinstance(body, dict):
        made = len(body["data"])
        for job in _get(f"/api/v1/jobs?limit={made}", API_KEY).json()["jobs"][:made]:
            _journal({"kind": "job", "job_id": job["job_id"]})
    elif operation == OPENAI_CHAT and response.status_code == 200:
        model = str(case.body["model"]).removeprefix("models/")
        _journal({"kind": "text_call", "model": model, "chunks": [{"usageMetadata": _openai_usage(response, body)}]})


def _openai_usage(response: Any, body: Any) -> dict[str, int]:
    """A chat completion's usage as the vendor's usageMetadata. A stream without include_usage tells its client
    none: then the token counts of the statement's newest entry (its charge, or a release) stand in."""
    usage = body.get("usage") if isinstance(body, dict) else None
    if usage is None:
        text = response.content.decode("utf-8", errors="replace")
        events = [line[len("data:"):].strip() for line in text.splitlines() if line.startswith("data:")]
        usages = [json.loads(e)["usage"] for e in events if e != "[DONE]" and json.loads(e).get("usage")]
        usage = usages[-1] if usages else None
    if usage is None:
        _wait_until_quiet(None)
        entry = _get("/api/v1/ledger?limit=1", API_KEY).json()["entries"][0]
        if entry["type"] != "charge":
            return {"promptTokenCount": 0, "candidatesTokenCount": 0}
        return {"promptTokenCount": entry["prompt_token_count"], "candidatesTokenCount": entry["candidates_token_count"]}
    return {"promptTokenCount": usage["prompt_tokens"], "candidatesTokenCount": usage["completion_tokens"]}


def _chunks(response: Any, body: Any) -> list[Any]:
    """The GenerateContentResponse objects of an answer: one JSON object, a JSON array, or SSE `data:` events."""
    if isinstance(body, dict):
        return [body]
    if isinstance(body, list):
        return body
    text = response.content.decode("utf-8", errors="replace")
    return [json.loads(line[len("data:"):]) for line in text.splitlines() if line.startswith("data:")]


@schemathesis.check
def no_money_or_job_moved_by_an_error(ctx: Any, response: Any, case: Any) -> None:
    """An answer with status >= 400 left every balance and the number of jobs exactly as they were."""
    if response.status_code < 400:
        return
    recorded = getattr(_local, "verdict", None)
    if recorded is None or recorded[0] is not response or recorded[1] is None:
        # Only possible for a response this run did not send through case.call(); nothing to compare.
        return
    before, after = recorded[1]
    if before != after:
        raise AssertionError(
            f"an error answer ({response.status_code}) moved money or created a job:\n  before: {before}\n  after:  {after}"
        )
