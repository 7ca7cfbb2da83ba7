#!/usr/bin/env python3
"""pyiso8583 as an independent packer for cardbench's ISO 8583 tests.

Reads JSON on stdin: {"spec": "default" | "default_ascii", "encode": [message...], "decode": [hex...]}
where a message is {"t": "0200", "fields": {"2": "4761...", "55": "9F2608..."}} (binary fields as hex).
Writes {"encoded": [hex...], "decoded": [message...]}: pyiso8583's bytes for each message, and its
reading of each hex string (binary fields as hex again).
"""
import json
import sys

import iso8583
from iso8583 import specs

def main():
    req = json.load(sys.stdin)
    spec = getattr(specs, req["spec"])
    out = {"encoded": [], "decoded": []}
    for m in req.get("encode", []):
        doc = {"t": m["t"]}
        # pyiso8583 takes and gives binary fields (data_enc "b") as hex strings itself.
        doc.update(m["fields"])
        raw, _ = iso8583.encode(doc, spec)
        out["encoded"].append(raw.hex().upper())
    for h in req.get("decode", []):
        doc, _ = iso8583.decode(bytes.fromhex(h), spec)
        fields = {}
        for k, v in doc.items():
            if k in ("t", "p", "1", "h"):
                continue
            fields[k] = v.upper() if spec[k]["data_enc"] == "b" or k == "55" else v
        out["decoded"].append({"t": doc["t"], "fields": fields})
    json.dump(out, sys.stdout)

if __name__ == "__main__":
    main()
