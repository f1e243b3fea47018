#!/bin/bash
# the two after-the-loop cases again, as dec05b-after/run.sh runs them, into /tmp/dec05b-item4
OUT=/tmp/dec05b-item4 exec "$(dirname "$0")/../dec05b-after/run.sh" "$@"
