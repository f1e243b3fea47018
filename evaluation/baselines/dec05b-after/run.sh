#!/bin/bash
# after-figures for suite dec05b: one reduction at a time, each from a copy of its case folder
set -u
SG=/work/main/.venv/bin/shrinkgpu
PY=/work/main/.venv/bin/python
OUT=${OUT:-/tmp/dec05b-after}  # (dec05b-item4/run.sh sets its own)
for c in "$@"; do
  src=/work/main/evaluation/cases/$c
  script=$(grep '^script' $src/case.toml | sed 's/.*= *"\(.*\)"/\1/')
  keep=$($PY -c "import tomllib;print(tomllib.load(open('$src/case.toml','rb'))['keep_error'])")
  stem=${script%.py}
  limit=240; [ "$c" = wordlm_best_checkpoint ] && limit=410
  rm -rf $OUT/$c $OUT/work-$c; mkdir -p $OUT/$c; cp -r $src $OUT/work-$c
  cd $OUT/work-$c
  start=$(date +%s.%N)
  $SG reduce --keep-error "$keep" --max-time $limit --json -o $OUT/$c/$stem.min.py $script < /dev/null > $OUT/$c/summary.json 2> $OUT/$c/stderr.txt
  echo "rc=$?" > $OUT/$c/rc.txt
  end=$(date +%s.%N); echo "wall=$(echo "$end - $start" | bc)" >> $OUT/$c/rc.txt
  # each artifact alone in an empty directory
  for f in $OUT/$c/$stem.min.py $OUT/$c/$stem.extracted.py $OUT/$c/$stem.min.alone.py; do
    [ -f "$f" ] || continue
    e=$(mktemp -d); cp "$f" $e/
    (cd $e && $SG run --json $(basename $f) < /dev/null > $OUT/$c/alone-$(basename $f).json 2>/dev/null)
    rm -rf $e
  done
  echo "$c done $(cat $OUT/$c/rc.txt | tr '\n' ' ')"
done
