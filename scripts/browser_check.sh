#!/usr/bin/env bash
# Look at the notebooks and the trajectory report in a real browser (see scripts/browser_check.py).
# Serves JupyterLab headless on localhost from the project's venv, runs 07_trajectories in it and opens
# runs/NAME/trajectories.html, all in headless Chromium; screenshots + findings.json land in $OUT.
#   RUN_DIR=runs/default OUT=runs/browser-check scripts/browser_check.sh
# Needs a finished run (make run) and Chromium (Debian: apt-get install -y chromium); installs playwright
# into the venv on first use. Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
RUN_DIR=${RUN_DIR:-runs/default}
OUT=${OUT:-runs/browser-check}
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$CHROMIUM" ] || { echo "no chromium on PATH: apt-get install -y chromium (or set CHROMIUM=)" >&2; exit 2; }
[ -d "$RUN_DIR/eval" ] || { echo "no finished run in $RUN_DIR: run \`make run\` first (or set RUN_DIR=)" >&2; exit 2; }
"$VENV/bin/python" -c "import playwright" 2>/dev/null || "$VENV/bin/pip" install -q "playwright==1.65.*"
"$VENV/bin/python" -m ipykernel install --sys-prefix --name grepseek --display-name GrepSeek > /dev/null

PORT=$("$VENV/bin/python" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
TOKEN=$("$VENV/bin/python" -c "import secrets; print(secrets.token_hex(16))")
mkdir -p "$OUT"
ROOT_FLAG=$([ "$(id -u)" = 0 ] && echo --allow-root || true)  # containers often run as root
# GREPSEEK_RUNS: the notebook's run_dir = None must find RUN_DIR, as runs/default is found after `make run`.
GREPSEEK_RUNS=$(cd "$(dirname "$RUN_DIR")" && pwd) "$VENV/bin/jupyter" lab --no-browser --ip=127.0.0.1 \
    --port="$PORT" --IdentityProvider.token="$TOKEN" --ServerApp.root_dir="$PWD" \
    --LabApp.expose_app_in_browser=True $ROOT_FLAG > "$OUT/jupyterlab.log" 2>&1 &
LAB=$!
trap 'kill $LAB 2>/dev/null || true' EXIT
for _ in $(seq 60); do
    curl -fs "http://127.0.0.1:$PORT/api/status?token=$TOKEN" > /dev/null && break
    sleep 1
done
curl -fs "http://127.0.0.1:$PORT/api/status?token=$TOKEN" > /dev/null \
    || { echo "JupyterLab did not start; see $OUT/jupyterlab.log" >&2; exit 1; }
[ "$(basename "$RUN_DIR")" = default ] || echo "note: 07_trajectories opens runs/default; RUN_DIR=$RUN_DIR is only used for the report" >&2
"$VENV/bin/python" scripts/browser_check.py --run-dir "$RUN_DIR" --chromium "$CHROMIUM" --out "$OUT" \
    --lab-url "http://127.0.0.1:$PORT/lab/tree/notebooks/07_trajectories.ipynb?token=$TOKEN"
echo "screenshots: $OUT/*.png"
