"""After a fuzz run (infra/fuzz.sh): every balance replayed from the journal the hooks kept.

For each account: balance = credits (opening + addCredits) - what its jobs were
charged (GET /api/v1/jobs/{id}) - what its synchronous text calls were charged
(their final usage at the model's token prices then in force), exactly, in picodollars, with
nothing reserved. The same replay as test/transport/openapi-fuzz.test.ts.

Usage: schemathesis_ledger.py BASE_URL ADMIN_TOKEN API_KEY ACCOUNT_ID OPENING JOURNAL
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import requests

TERMINAL = {"done", "failed"}


def pico(amount: str) -> int:
    """Exact decimal dollars as integer picodollars (never a float)."""
    sign = -1 if amount.startswith("-") else 1
    whole, _, fraction = amount.lstrip("+-").partition(".")
    if len(fraction) > 12:
        raise ValueError(f"more than 12 decimals: {amount!r}")
    return sign * (int(whole or "0") * 10**12 + int(fraction.ljust(12, "0")))


def token_prices(price: dict[str, Any]) -> dict[str, int]:
    """A model's per-token prices (picodollars per million tokens); empty strings are unset."""
    output = price.get("output_per_million_tokens") or "0"
    return {
        "input": pico(price.get("input_per_million_tokens") or "0"),
        "output": pico(output),
        "video_output": pico(price.get("video_output_per_million_tokens") or output),
    }


def text_charge(chunks: list[dict[str, Any]], prices: dict[str, int]) -> int:
    if any((chunk.get("promptFeedback") or {}).get("blockReason") for chunk in chunks):
        return 0
    usages = [chunk["usageMetadata"] for chunk in chunks if chunk.get("usageMetadata")]
    if not usages:
        return 0
    usage = usages[-1]
    details = usage.get("candidatesTokensDetails") or [{"modality": "TEXT", "tokenCount": usage.get("candidatesTokenCount", 0)}]
    tokens = lambda modality: sum(d.get("tokenCount", 0) for d in details if d.get("modality") == modality)  # noqa: E731
    return (
        prices["input"] * usage.get("promptTokenCount", 0) // 1_000_000
        + prices["output"] * tokens("TEXT") // 1_000_000
        + prices["video_output"] * tokens("VIDEO") // 1_000_000
    )


# Image models ignoring imageSize (always 1K), as the catalog says.
FIXED_RESOLUTION = {"aimodel-2.5-flash-image": "1K"}


def image_charge(entry: dict[str, Any], per_image: dict[str, str]) -> int:
    """An image model's call: its per-image price at the resolution asked for (1K by default); a blocked prompt costs nothing."""
    if any((chunk.get("promptFeedback") or {}).get("blockReason") for chunk in entry["chunks"]):
        return 0
    model = entry["model"].removesuffix("-preview")
    resolution = FIXED_RESOLUTION.get(model) or (entry.get("image_size") or "1K").upper()
    return pico(per_image[resolution])


def main(base_url: str, admin_token: str, api_key: str, account_id: str, opening: str, journal_path: str) -> int:
    session = requests.Session()
    admin = {"authorization": f"Bearer {admin_token}"}
    with open(journal_path, encoding="utf-8") as journal:
        entries = [json.loads(line) for line in journal if line.strip()]

    job_charges = 0
    for job_id in dict.fromkeys(e["job_id"] for e in entries if e["kind"] == "job"):
        deadline = time.monotonic() + 120
        while True:
            job = session.get(f"{base_url}/api/v1/jobs/{job_id}", headers={"authorization": f"Bearer {api_key}"}, timeout=30).json()
            if job.get("status") in TERMINAL:
                break
            if time.monotonic() > deadline:
                print(f"job {job_id} did not finish: {job}")
                return 1
            time.sleep(0.1)
        job_charges += pico(job["usage"]["charged"])

    # Each text call at the prices in force when it was made: the list before the first call, then every updatePrice in order.
    prices: dict[str, dict[str, int]] = {}
    per_image: dict[str, dict[str, str]] = {}
    text_charges = 0
    for entry in entries:
        if entry["kind"] in ("prices", "price"):
            for price in entry["prices"] if entry["kind"] == "prices" else [entry["price"]]:
                prices[price["model"]] = token_prices(price)
                per_image[price["model"]] = price.get("per_image") or {}
        elif entry["kind"] == "text_call" and per_image.get(entry["model"].removesuffix("-preview")):
            text_charges += image_charge(entry, per_image[entry["model"].removesuffix("-preview")])
        elif entry["kind"] == "text_call":
            text_charges += text_charge(entry["chunks"], prices[entry["model"]])

    credits = {account_id: pico(opening)}
    for entry in entries:
        if entry["kind"] == "account":
            credits[entry["account_id"]] = pico(entry["opening"])
        elif entry["kind"] == "credit":
            credits[entry["account_id"]] = credits.get(entry["account_id"], 0) + pico(entry["amount"])

    failures = 0
    for account, credited in credits.items():
        charged = job_charges + text_charges if account == account_id else 0
        url = f"{base_url}/admin/v1/accounts/{requests.utils.quote(account, safe='')}/balance"
        deadline = time.monotonic() + 60
        while True:
            balance = session.get(url, headers=admin, timeout=30).json()
            if balance.get("reserved") == "0.00" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if balance.get("reserved") != "0.00" or pico(balance["balance"]) != credited - charged:
            failures += 1
            print(f"account {account}: {balance} but credits {credited} - charges {charged} = {credited - charged} picodollars")
    calls = [e for e in entries if e["kind"] == "call"]
    print(
        f"{len(credits)} accounts replayed exactly: {len(calls)} calls, {sum(1 for c in calls if c['status'] >= 400)} error answers "
        f"checked, {job_charges + text_charges} picodollars charged" if failures == 0 else f"{failures} accounts do not add up"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:7]))
