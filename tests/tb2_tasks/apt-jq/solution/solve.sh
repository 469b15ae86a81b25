#!/bin/bash
jq -r .name /app/package.json > /app/name.txt
