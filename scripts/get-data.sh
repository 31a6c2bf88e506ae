#!/usr/bin/env bash
# get-data.sh cifar10|svhn|mnist [DIR]: downloads a data set from its publisher, checks the
# SHA-256 of every file and lays it out for `ringtrain train --dataset NAME --data-dir DIR`
# (scripts/get_data.py; --help for the options).
exec /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/get_data.py" "$@"
