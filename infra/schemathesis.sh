#!/usr/bin/env bash
# Install Schemathesis (from PyPI) into a virtual environment of its own,
# .infra/schemathesis (ignored by git), at the versions pinned in
# infra/schemathesis.requirements.txt. test/transport/openapi-fuzz.test.ts and
# infra/fuzz.sh run .infra/schemathesis/bin/st against the service's own
# /openapi.json. Idempotent: when the venv already holds exactly the pinned
# requirements, nothing is downloaded. Needs python3 (3.9+) with the venv module.
# Usage: infra/schemathesis.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

python_venv schemathesis "$INFRA_DIR/schemathesis.requirements.txt" \
  'import schemathesis, hypothesis; print("schemathesis", schemathesis.__version__, "hypothesis", hypothesis.__version__)'
