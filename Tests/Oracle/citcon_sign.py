#!/usr/bin/env python3
"""An independent implementation of Citcon's IPN signature, written from the guide's prose
("How to verify UPI IPN signature"), for the Swift cross-check: reads a JSON list of
{"values": {...}, "secret": "..."} on stdin and prints a JSON list of signs."""
import hashlib
import json
import sys


def sign(values, secret):
    keys = [k for k in values.get("fields", "").split(",") if k]
    keys = sorted(set(keys) | {"fields"})
    text = "&".join(f"{k}={values.get(k, '')}" for k in keys) + "&secret=" + secret
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


print(json.dumps([sign(case["values"], case["secret"]) for case in json.load(sys.stdin)]))
