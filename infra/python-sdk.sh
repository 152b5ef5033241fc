#!/usr/bin/env bash
# Install the vendor's official Python SDK (google-genai) and OpenAI's (openai), from PyPI, into a
# virtual environment of its own, .infra/python-sdk (ignored by git), at the
# version pinned in infra/python-sdk.requirements.txt. The vendor-surface
# tests (test/transport/vendor-sdk-python.test.ts) run .infra/python-sdk/bin/python.
# Idempotent: when the venv already holds exactly the pinned requirements,
# nothing is downloaded. Needs python3 (3.9+) with the venv module.
# Usage: infra/python-sdk.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

python_venv python-sdk "$INFRA_DIR/python-sdk.requirements.txt" \
  'from google import genai; import openai; print("google-genai", genai.__version__, "openai", openai.__version__)'
