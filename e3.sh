#!/bin/bash
exit 3
