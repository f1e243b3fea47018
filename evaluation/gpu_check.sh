#!/usr/bin/env bash
# The device check, in one go, for a machine with an NVIDIA (or ROCm) GPU:
#
#   bash evaluation/gpu_check.sh [OUTDIR]      # default OUTDIR: bench-envs/gpu-check
#
# 1. what the machine is (GPUs without initialising CUDA, torch's build);
# 2. the tests marked `cuda`;
# 3. `shrinkgpu run` on the CUDA fixture without and with synchronous launches;
# 4. the CUDA fixture reduced with `--sync-launches never` and with the default (auto),
#    each capped, with what each kept (operator, tokens, candidates, isolation);
# 5. the comparisons of the reduced result run again (`shrinkgpu ablate`): the extracted
#    call on the CPU against the GPU, cuDNN off, deterministic algorithms, the GPUs hidden;
# 6. the candidate cost of the fork server against fresh interpreters on that fixture.
#
# Everything goes to OUTDIR (summary.md and one log per step); copy what summary.md says
# into docs/gpu.md.  Sized to end in about 8 minutes on one GPU; CAP (seconds per
# reduction, default 120) changes that.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-envs/gpu-check}
CAP=${CAP:-120}
mkdir -p "$OUT"
FX=tests/fixtures/cuda_class_index
export PYTHONUNBUFFERED=1
summary="$OUT/summary.md"
{
  echo "# GPU check, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo '```'
  nvidia-smi -L 2>/dev/null || echo "nvidia-smi: not found"
  python - <<'PY'
import torch
print("torch", torch.__version__, "cuda", torch.version.cuda, "hip", torch.version.hip)
print("devices:", torch.cuda.device_count(), [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
PY
  echo '```'
} > "$summary"

step() {  # step NAME COMMAND...: run, keep the log, note the exit status and time
  local name=$1; shift
  local t0=$(date +%s)
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "- $name: exit $rc in $(( $(date +%s) - t0 )) s (\`$*\`)" >> "$summary"
  return 0
}

echo -e "\n## Steps\n" >> "$summary"
step cuda-tests python -m pytest -m cuda -q -rA -n 0 tests
step run-never python -m shrinkgpu run "$FX/train_cuda.py" --sync-launches never --json
step run-auto python -m shrinkgpu run "$FX/train_cuda.py" --json
step reduce-never python -m shrinkgpu reduce "$FX/train_cuda.py" -k 'device-side assert' --sync-launches never \
  --max-time "$CAP" --verify 1 --confirm 0 -o "$OUT/never/train_cuda.min.py" --json
step reduce-auto python -m shrinkgpu reduce "$FX/train_cuda.py" -k 'device-side assert' \
  --max-time "$CAP" --verify 1 --confirm 0 -o "$OUT/auto/train_cuda.min.py" --json
step ablate-auto python -m shrinkgpu ablate "$OUT/auto/train_cuda.min.py" --json
step cost python -m evaluation.run --parts cost --cost-cases cuda_class_index --cost-fork-runs 10 \
  --cost-fresh-runs 3 --workdir "$OUT/cost"

python - "$OUT" >> "$summary" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("\n## What was seen\n")
def summary_of(log):
    text = (out / log).read_text(errors="replace")
    start = text.find("{")
    try:
        return json.loads(text[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        return None
for name in ("run-never", "run-auto"):
    data = summary_of(f"{name}.log")
    if not data or not data.get("signature"):
        print(f"- {name}: no signature (see {name}.log)")
        continue
    sig = data["signature"]
    op = (sig.get("op") or {}).get("name")
    surfaced = (data.get("surfaced_signature") or {}).get("op") or {}
    print(f"- {name}: `{sig['headline']}` at `{op}`; kernel assertion `{sig.get('kernel_assertion')}`; "
          f"launch env {data.get('launch_env')}; surfaced at `{surfaced.get('name')}`; {data.get('seconds')} s")
for name in ("reduce-never", "reduce-auto"):
    data = summary_of(f"{name}.log")
    if not data or "tokens_after" not in data:
        print(f"- {name}: no summary (see {name}.log)")
        continue
    sig = data["signature"]
    print(f"- {name}: {data['tokens_before']} -> {data['tokens_after']} tokens, {data['candidates_tested']} "
          f"candidates in {data['seconds']} s, isolation {data['isolation']}, operator "
          f"`{(sig.get('op') or {}).get('name')}`, verified {data['verified']}, stop: {data.get('stop_reason')}")
data = summary_of("ablate-auto.log")
if data and data.get("ablation"):
    a = data["ablation"]
    print(f"- ablate-auto: kind {a['kind']} ({a['reason']}); hint: {a.get('hint')}; {a['seconds']} s")
    for c in a["changes"]:
        print(f"  - {c['change']} ({c['subject']}): {c['outcome']}" + (f": {c['error']}" if c.get("error") else ""))
else:
    print("- ablate-auto: no comparisons (see ablate-auto.log)")
res = out / "cost" / "results.json"
if res.is_file():
    for row in json.loads(res.read_text()).get("cost", []):
        print(f"- cost {row['candidate']}: fork {row.get('fork_median')} s, fresh {row.get('fresh_median')} s, "
              f"ratio {row.get('ratio')}, isolation {row.get('fork_isolation')}")
tests = (out / "cuda-tests.log").read_text(errors="replace").strip().splitlines()
print("\n## cuda tests\n\n```\n" + "\n".join(tests[-15:]) + "\n```")
PY
cat "$summary"
