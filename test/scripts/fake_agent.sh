#!/bin/sh
# A stand-in plm_rsh_agent for test_elastic.sh: `fake_agent.sh HOST true` answers unless
# $FAKE_ELASTIC_DIR/down/HOST exists (a node that is gone).
[ -e "$FAKE_ELASTIC_DIR/down/$1" ] && { echo "fake_agent: $1: no route to host" >&2; exit 255; }
exit 0
