#!/usr/bin/env bash
# One-shot GPU check of roofline's calibration: at most 8 minutes, no network needed.
#
#   bash calibrate/gpu_check.sh [OUT]        (OUT defaults to $OUT, else ./out)
#
# 1. reports the Python packages present (torch is required; roofline need not be installed:
#    it tries `pip install --no-deps -e .` offline and falls back to PYTHONPATH=<repo>);
# 2. calibrates cuda:0 with a 90 s budget  -> OUT/profile.yaml, OUT/profile.measurements.jsonl;
# 3. renders the profile                   -> OUT/profile_summary.txt;
# 4. runs closed-loop validation when calibrate/closedloop/validate.py exists -> OUT/validation.csv
#    (VALIDATE_ARGS overrides its arguments; default "--model llama-3.1-8b --scale full" on a GPU,
#    "--scale tiny" for a DEVICE=cpu dry run), then on a GPU refits the profile's per-kernel CUDA-graph
#    cost from those decode steps (calibrate/closedloop/graphcost.py) -> OUT/profile.yaml;
# 5. writes every step's log to OUT/*.log and a final status table to OUT/gpu_check.log.
# DEVICE (default cuda:0) and BUDGET (default 90) exist for dry runs, e.g. DEVICE=cpu BUDGET=20.
# Exit code: 0 when the profile was written (validation problems are reported, not fatal),
# 3 missing required packages, 4 no GPU, 5 calibration failed.

set -u -o pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
OUT="${1:-${OUT:-./out}}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
exec > >(tee -a "$OUT/gpu_check.log") 2>&1

TOTAL_S=480
DEVICE="${DEVICE:-cuda:0}"
BUDGET="${BUDGET:-90}"
START=$(date +%s)
PY="${PYTHON:-$(command -v python3 || command -v python)}"
declare -A STATUS

elapsed() { echo $(( $(date +%s) - START )); }
left() { echo $(( TOTAL_S - $(elapsed) )); }
say() { echo "[gpu_check $(elapsed)s] $*"; }

finish() {
    say "summary"
    for step in deps roofline gpu calibrate show validate; do
        printf '  %-10s %s\n' "$step" "${STATUS[$step]:-not run}"
    done
    say "files in $OUT:"
    ls -l "$OUT"
    exit "$1"
}

# ---- 1. packages ------------------------------------------------------------------------
say "repo $REPO, python $PY ($("$PY" --version 2>&1)), OUT=$OUT"
command -v nvidia-smi >/dev/null && nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1 && nvidia-smi -L
missing_required=()
for mod in torch numpy pydantic yaml rich pynvml pandas typer; do  # also what roofline imports
    ver=$("$PY" -c "import $mod as m; print(getattr(m, '__version__', 'present'))" 2>/dev/null)
    if [ -n "$ver" ]; then
        say "package $mod: $ver"
    else
        case $mod in
            torch|numpy|pydantic|yaml) missing_required+=("$mod"); say "package $mod: MISSING (required)";;
            rich) say "package $mod: missing (optional: no rendered summary, profile_summary.txt will say so)";;
            pynvml) say "package $mod: missing (optional: no clocks/temperature/power/throttle in provenance)";;
            pandas) say "package $mod: missing (needed by validation only)";;
            typer) say "package $mod: missing (optional: python -m calibrate does not need it)";;
        esac
    fi
done
if [ ${#missing_required[@]} -gt 0 ]; then
    STATUS[deps]="FAILED: missing ${missing_required[*]} (install their wheels offline; pip cannot reach an index here)"
    finish 3
fi
STATUS[deps]="ok"

# ---- 2. make roofline importable ------------------------------------------------------------
if "$PY" -c "import roofline, calibrate.cli" 2>/dev/null && [ "$("$PY" -c 'import roofline, os; print(os.path.dirname(os.path.dirname(roofline.__file__)))')" = "$REPO" ]; then
    STATUS[roofline]="ok (already importable from $REPO)"
elif timeout 90 "$PY" -m pip install --no-deps --no-build-isolation --no-index -e . > "$OUT/pip_install.log" 2>&1 \
        && "$PY" -c "import roofline, calibrate.cli" 2>/dev/null; then
    STATUS[roofline]="ok (pip install --no-deps -e .)"
else
    export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
    if "$PY" -c "import roofline, calibrate.cli" 2> "$OUT/import_error.log"; then
        STATUS[roofline]="ok (PYTHONPATH=$REPO; pip install -e . failed, see pip_install.log)"
    else
        STATUS[roofline]="FAILED: cannot import roofline even with PYTHONPATH (see import_error.log)"
        finish 3
    fi
fi
say "roofline: ${STATUS[roofline]}"

# ---- 3. GPU present? ---------------------------------------------------------------------------
if [ "$DEVICE" = cpu ]; then
    STATUS[gpu]="skipped (DEVICE=cpu dry run)"
elif ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    STATUS[gpu]="FAILED: torch $("$PY" -c 'import torch; print(torch.__version__)') sees no CUDA device"
    finish 4
else
    STATUS[gpu]="ok ($("$PY" -c 'import torch; print(torch.cuda.get_device_name(0))'))"
fi
say "gpu: ${STATUS[gpu]}"

# ---- 4. calibrate ------------------------------------------------------------------------------
say "calibrating $DEVICE (budget $BUDGET s) ..."
t0=$(elapsed)
timeout $(( BUDGET + 150 )) "$PY" -m calibrate --device "$DEVICE" --budget "$BUDGET" --no-progress -o "$OUT/profile.yaml" \
    > "$OUT/calibrate.log" 2>&1
rc=$?
tail -n 20 "$OUT/calibrate.log"
if [ $rc -ne 0 ] || [ ! -f "$OUT/profile.yaml" ]; then
    STATUS[calibrate]="FAILED rc=$rc after $(( $(elapsed) - t0 )) s (see calibrate.log; measurements so far in profile.measurements.jsonl)"
    finish 5
fi
STATUS[calibrate]="ok in $(( $(elapsed) - t0 )) s"

# ---- 5. render ------------------------------------------------------------------------------------
if "$PY" -m calibrate --show "$OUT/profile.yaml" > "$OUT/profile_summary.txt" 2>&1; then
    STATUS[show]="ok"
    cat "$OUT/profile_summary.txt"
else
    STATUS[show]="FAILED (see profile_summary.txt)"
fi

# ---- 6. closed-loop validation (only when the harness exists) ----------------------------------
if [ -f calibrate/closedloop/validate.py ]; then
    budget=$(( $(left) - 20 ))
    if [ $budget -lt 30 ]; then
        STATUS[validate]="skipped: only $(left) s left of $TOTAL_S"
    elif ! "$PY" -c "import pandas" 2>/dev/null; then
        STATUS[validate]="skipped: pandas is missing"
    else
        [ $budget -gt 300 ] && budget=300
        say "validating (timeout ${budget} s) ..."
        # shellcheck disable=SC2086  # VALIDATE_ARGS is a word list on purpose
        # GPU: the real Llama-3.1-8B shapes (issue target); CPU dry run: the tiny scaled model
        default_args="--model llama-3.1-8b --scale full"
        [ "$DEVICE" = cpu ] && default_args="--model llama-3.1-8b --scale tiny"
        timeout "$budget" "$PY" -m calibrate.closedloop.validate ${VALIDATE_ARGS:-$default_args} \
            --device "$DEVICE" --calibration "$OUT/profile.yaml" -o "$OUT/validation.csv" > "$OUT/validate.log" 2>&1
        rc=$?
        tail -n 30 "$OUT/validate.log"
        case $rc in
            0) STATUS[validate]="ok (validation.csv)"
               # 7. the per-kernel CUDA-graph cost of whole decode steps (calibrate/closedloop/graphcost.py)
               if [ "$DEVICE" != cpu ]; then
                   if "$PY" -m calibrate.closedloop.graphcost --calibration "$OUT/profile.yaml" "$OUT/validation.csv" \
                           -o "$OUT/profile.yaml" --force > "$OUT/graphcost.log" 2>&1; then
                       STATUS[validate]="ok (validation.csv); $(tail -n 1 "$OUT/graphcost.log")"
                   else
                       STATUS[validate]="ok (validation.csv); graph-cost refit FAILED (see graphcost.log)"
                   fi
               fi;;
            124) STATUS[validate]="TIMED OUT after ${budget} s (see validate.log)";;
            *) STATUS[validate]="FAILED rc=$rc (see validate.log)";;
        esac
    fi
else
    STATUS[validate]="skipped: calibrate/closedloop/validate.py not present"
fi
finish 0
