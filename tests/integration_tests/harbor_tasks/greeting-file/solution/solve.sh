#!/bin/bash
echo "Good morning" > /app/greeting.txt
