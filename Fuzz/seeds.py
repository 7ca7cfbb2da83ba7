#!/usr/bin/env python3
"""Writes the committed seed corpora in Fuzz/corpus/<target>/ from the tests' vectors, the
scenario library's URLs and card profiles, and a few hand-built exchanges (T=1 blocks, vpcd
frames) that reach past each parser's first checks. Run from anywhere; it replaces the seeds it
makes (named seed-<sha1>) and leaves any other file alone. Needs PyYAML (Debian: python3-yaml)."""

import glob
import hashlib
import json
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, "Fuzz", "corpus")


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def hex_literals(*patterns):
    """Quoted hex strings (spaces allowed) in the given test files, as bytes."""
    out = []
    for pattern in patterns:
        for path in sorted(glob.glob(os.path.join(ROOT, pattern))):
            for m in re.finditer(r'"([0-9A-Fa-f ]+)"', open(path, encoding="utf-8").read()):
                digits = m.group(1).replace(" ", "")
                if digits and len(digits) % 2 == 0:
                    out.append(bytes.fromhex(digits))
    return out


def scenario_documents():
    for path in sorted(glob.glob(os.path.join(ROOT, "Scenarios", "**", "*.yaml"), recursive=True)):
        if os.sep + "cards" + os.sep in path:
            continue
        yield path, open(path, encoding="utf-8").read()


def opened_urls():
    urls = []
    for _, text in scenario_documents():
        doc = yaml.safe_load(text)
        for step in doc.get("steps", []) if isinstance(doc, dict) else []:
            if isinstance(step, dict) and isinstance(step.get("open"), str):
                urls.append(step["open"])
    # URLs the Swift tests write literally (those with interpolation are left out).
    for path in sorted(glob.glob(os.path.join(ROOT, "Tests", "**", "*.swift"), recursive=True)):
        for m in re.finditer(r'"((?:vivapayclient|billpocket)://[^"\\]*)"', open(path, encoding="utf-8").read()):
            urls.append(m.group(1))
    return urls


def card_profiles():
    # The shipped profiles, and a captured one (docs/examples): the fields only captures write.
    paths = sorted(glob.glob(os.path.join(ROOT, "Scenarios", "cards", "*.yaml"))) + sorted(glob.glob(os.path.join(ROOT, "docs", "examples", "*.yaml")))
    return [open(p, encoding="utf-8").read() for p in paths]


def capk_seeds():
    """The shipped CAPK file cut into files of one to three keys (a whole file is 40 kB)."""
    text = open(os.path.join(ROOT, "Scenarios", "ca", "capk.yaml"), encoding="utf-8").read()
    entries = ["  - rid:" + e for e in text.split("keys:\n", 1)[1].split("  - rid:")[1:]]
    out = []
    for size in (1, 2, 3):
        for i in range(0, len(entries), 7):
            out.append(("keys:\n" + "".join(entries[i:i + size])).encode())
    return out


def profile_values(key):
    out = []
    for text in card_profiles():
        doc = yaml.safe_load(text)
        for app in doc.get("applications", []):
            if isinstance(app.get(key), str):
                out.append(bytes.fromhex(app[key]))
        if key == "atr" and isinstance(doc.get("atr"), str):
            out.append(bytes.fromhex(doc["atr"]))
    return out


# MARK: T=1

def lrc(body):
    x = 0
    for b in body:
        x ^= b
    return bytes([x])


def crc(body):
    c = 0xFFFF
    for b in body:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x8408 if c & 1 else c >> 1
    return bytes([c >> 8, c & 0xFF])


def block(pcb, info=b"", edc=lrc):
    body = bytes([0, pcb, len(info)]) + info
    return body + edc(body)


def answers(*chunks):
    """Each chunk is what the card sends after the terminal's next write."""
    out = b""
    for c in chunks:
        out += bytes([len(c)]) + c
    return out


def t1_seeds():
    ok = b"\x90\x00"
    seeds = []
    for config, edc in ((0x00, lrc), (0x01, crc)):
        # An APDU of 5 bytes in one I-block, answered by one I-block.
        seeds.append(bytes([config, 1]) + answers(block(0x00, b"\x01\x02" + ok, edc)))
        # IFSD negotiated first, then two exchanges with alternating N(S).
        seeds.append(bytes([config | 2, 1]) + answers(block(0xE1, b"\xFE", edc), block(0x00, ok, edc), block(0x40, ok, edc)))
        # The card chains its answer: I(0,M), the terminal acknowledges with R(1), then I(1).
        seeds.append(bytes([config, 1]) + answers(block(0x20, b"\x01" * 20, edc), block(0x40, ok, edc)))
        # The terminal chains (IFSC 4, a 20-byte APDU): R-blocks acknowledge each I-block.
        seeds.append(bytes([config | (4 << 2), 16]) + answers(block(0x90, b"", edc), block(0x80, b"", edc), block(0x90, b"", edc),
                                                             block(0x80, b"", edc), block(0x00, ok, edc)))
        # WTX and IFS requests from the card, then the answer.
        seeds.append(bytes([config, 1]) + answers(block(0xC3, b"\x02", edc), block(0xC1, b"\x20", edc), block(0x00, ok, edc)))
        # A bad EDC, an R-block asking again, silence, then resynchronisation and the answer.
        bad = bytearray(block(0x00, ok, edc))
        bad[-1] ^= 0xFF
        seeds.append(bytes([config, 1]) + answers(bytes(bad), block(0x80, b"", edc), b"", b"", block(0xE0, b"", edc), block(0x00, ok, edc)))
        # The card aborts.
        seeds.append(bytes([config, 1]) + answers(block(0xC2, b"", edc)))
    return seeds


# MARK: vpcd

def frame(payload):
    return len(payload).to_bytes(2, "big") + payload


def vpcd_seeds():
    atr = bytes.fromhex("3B6800008066A2060201320E")
    return [
        frame(atr) + frame(b"\x90\x00") + frame(b"\x6F\x00\x90\x00"),
        frame(atr) + frame(b"\x01\x02\x03\x04\x05\x90\x00"),
        frame(b"\x01") + frame(b"\x04") + frame(bytes.fromhex("00A404000E315041592E5359532E4444463031")) + frame(b"\x00"),
        frame(b"\x02") + frame(b"\x04") + frame(b"") + frame(b"\x07") + frame(b"\x00\xB2\x01\x0C\x00"),
        frame(atr) + b"\x00",
        frame(atr) + b"\x00\x05\x90",
        b"\xFF\xFF" + b"\x00" * 16,
        b"",
    ]


# MARK: JSON bodies

def json_seeds(urls):
    import json
    bodies = [{"url": u, "terminal": "bench1", "wait": i % 2 == 0} for i, u in enumerate(urls[:24])]
    bodies += [
        {"set": "2026-01-15T10:30:00Z"}, {"advanceSeconds": 3600},
        {"profile": "visa-credit-cvn10", "removeAfter": "GENERATE AC", "pinTries": 2, "corruptCryptogram": True},
        {"profileYAML": open(os.path.join(ROOT, "Scenarios", "cards", "visa-one-pin-try.yaml"), encoding="utf-8").read()},
        {"pin": "1234"}, {"select": 2}, {"confirm": True}, {"cancel": True},
        {"code": "51"}, {"unavailable": True}, {"delayMs": 1500},
        {"name": "Tienda \u00e9", "msi": {"3": 30000, "6": 60000}}, {"user": 1, "alias": "caja-1"},
    ]
    seeds = [json.dumps(b).encode() for b in bodies]
    seeds += [b'{"url": "a", "url": "b"}', b'{"pin": "12\\u00004"}', b'{"a": [1, 2.5e3, true, null, {"b": "\\ud83d\\ude00"}]}',
              b' [ ] ', b'"x"', b'{"k\\/": "\\/"}']
    return seeds


def worldline_seeds():
    """Server API bodies (the scenario library's requests and payments as the runner builds them,
    an Objective-C SDK body with strings), a customer input payload, the jwcrypto JWE vector and
    Authorization values: the Worldline target tries each input as all of them."""
    seeds = []
    for _, text in scenario_documents():
        for m in re.finditer(r"body: '(\{.*\})'", text):
            seeds.append(m.group(1).encode())
    card = {"cardNumber": "4761739001010010", "expiryDate": "1231", "cvv": "123", "cardholderName": "A B"}
    for mode in ["SALE", "FINAL_AUTHORIZATION", "PRE_AUTHORIZATION"]:
        seeds.append(json.dumps({"order": {"amountOfMoney": {"amount": 1000, "currencyCode": "EUR"}, "references": {"merchantReference": "r"}},
                                 "cardPaymentMethodSpecificInput": {"authorizationMode": mode, "card": card,
                                                                    "threeDSecure": {"redirectionData": {"returnUrl": "https://s.example/b"}}}}).encode())
    seeds.append(b'{"order":{"amountOfMoney":{"amount":"1000","currencyCode":"EUR"}},"encryptedCustomerInput":"a.b.c.d.e"}')
    seeds.append(b'{"amount":500,"isFinal":"true"}')
    seeds.append(b'{"amountOfMoney":{"amount":100,"currencyCode":"EUR"}}')
    seeds.append(json.dumps({"clientSessionId": "s", "nonce": "n", "paymentProductId": "1", "tokenize": "false", "accountOnFileId": 12,
                             "paymentValues": [{"key": k, "value": v} for k, v in card.items()]}).encode())
    vector = json.loads(read("Tests/FrontsTests/Fixtures/worldline-jwe-vector.json"))
    seeds.append(vector["jwe"].encode())
    seeds += [b"GCS v1HMAC:key:c2lnbmF0dXJl", b"GCS v1Client:abc", b"Tue, 24 Nov 2026 12:00:00 GMT"]
    return seeds


def citcon_seeds():
    """Charge and operation bodies as the Citcon scenarios and the merchant backend send them."""
    seeds = []
    for _, text in scenario_documents():
        for m in re.finditer(r"body: '(\{.*\})'", text):
            seeds.append(m.group(1).encode())
    card = {"pan": "4761739001010010", "expiry": "12/31", "cvv": "123"}
    for method, extra in [("card", {"data": card, "request_3ds": True}), ("wechatpay", {}), ("paypal", {}), ("upop", {})]:
        seeds.append(json.dumps({"transaction": {"reference": "r", "amount": 1000, "currency": "USD", "country": "US", "auto_capture": False},
                                 "payment": dict({"method": method, "client": ["mobile_native"]}, **extra),
                                 "urls": {"ipn": "http://127.0.0.1:9/ipn", "success": "https://s.example/ok"}}).encode())
    seeds.append(b'{"transaction":{"reference":"r","amount":"100","currency":"USD","ipn_url":"https://m.example/ipn"}}')
    seeds.append(b'{"transaction_id":"8b3ac410a2d911ec8410e9f493c7d3ef","amount":600,"reference":"c1"}')
    return seeds


def trace_seeds():
    """The traces of the decoding tests, one exchange per line."""
    text = read("Tests/EMVTests/TraceDecodingTests.swift")
    pairs = []
    for m in re.finditer(r'X\(command: ((?:"[^"]*"(?: \+ )?)+), response: ((?:"[^"]*"(?: \+ )?)+)', text):
        join = lambda group: "".join(re.findall(r'"([^"]*)"', group)).replace(" ", "")
        pairs.append(join(m.group(1)) + " " + join(m.group(2)))
    seeds = ["\n".join(pairs).encode()] + [p.encode() for p in pairs]
    return seeds


def iso8583_seeds():
    """A sale, its answer and an echo in each packager's format (first byte: the packager, second:
    the framing, 0 for none), and one framed in each framing."""
    def bitmap(fields):
        bits = bytearray(16 if max(fields) > 64 else 8)
        if max(fields) > 64:
            bits[0] |= 0x80
        for n in fields:
            bits[(n - 1) // 8] |= 0x80 >> ((n - 1) % 8)
        return bytes(bits)
    def bcd(digits, left=True):
        if len(digits) % 2:
            digits = "0" + digits if left else digits + "0"
        return bytes.fromhex(digits.replace("=", "D"))
    icc = bytes.fromhex("9F2608A1B2C3D4E5F607089F360200079F2701809F100706010A03A00000")
    sale = {2: "4761730000000119", 3: "000000", 4: "000000001050", 11: "000042", 22: "051",
            35: "4761730000000119=2812201", 41: "CBTERM01", 49: "484", 52: bytes(8), 55: icc}
    answer = {11: "000042", 38: "A1B2C3", 39: "00", 55: bytes.fromhex("910A0102030405060708303072109F180400000001860784240000040000")}
    echo = {7: "1125093015", 11: "000001", 70: "301"}
    ll = {2, 35}
    lll = {55}
    def ascii_message(mti, fields, hex_bitmap, hex_binary, count_chars):
        out = mti.encode() + (bitmap(fields).hex().upper().encode() if hex_bitmap else bitmap(fields))
        for n in sorted(fields):
            v = fields[n]
            if isinstance(v, bytes):
                data = v.hex().upper().encode() if hex_binary and (n != 55 or count_chars) else v
                if n in lll:
                    out += b"%03d" % (len(data) if count_chars else len(v))
                out += data
            else:
                if n in ll:
                    out += b"%02d" % len(v)
                out += v.encode()
        return out
    def bcd_message(mti, fields):
        out = bcd(mti) + bitmap(fields)
        for n in sorted(fields):
            v = fields[n]
            if isinstance(v, bytes):
                if n in lll:
                    out += bcd("%04d" % len(v))
                out += v
            elif n in ll:
                out += bcd("%02d" % len(v)) + bcd(v, left=False)
            elif n in (38, 39, 41, 49):
                out += v.encode()
            else:
                out += bcd(v)
        return out
    seeds = []
    for mti, fields in [("0200", sale), ("0210", answer), ("0800", echo)]:
        seeds.append(b"\x00\x00" + ascii_message(mti, fields, False, False, False))
        seeds.append(b"\x01\x00" + ascii_message(mti, fields, True, True, True))
        seeds.append(b"\x02\x00" + ascii_message(mti, fields, True, True, False))
        seeds.append(b"\x03\x00" + bcd_message(mti, fields))
    body = ascii_message("0800", echo, False, False, False)
    seeds.append(b"\x00\x80" + len(body).to_bytes(2, "big") + body)
    seeds.append(b"\x00\x81" + (len(body) + 5).to_bytes(2, "big") + bytes.fromhex("6000010000") + body)
    seeds.append(b"\x00\x82" + b"%04d" % len(body) + body)
    return seeds


def write(target, seeds):
    directory = os.path.join(CORPUS, target)
    os.makedirs(directory, exist_ok=True)
    for old in glob.glob(os.path.join(directory, "seed-*")):
        os.remove(old)
    unique = {hashlib.sha1(s).hexdigest(): s for s in seeds}
    for digest, s in sorted(unique.items()):
        with open(os.path.join(directory, "seed-" + digest), "wb") as f:
            f.write(s)
    print(f"{target}: {len(unique)} seeds")


def main():
    urls = opened_urls()
    write("tlv", hex_literals("Tests/EMVTests/TLVTests.swift", "Tests/EMVTests/VectorTests.swift",
                              "Tests/EMVTests/CardDataTests.swift", "Tests/VirtualCardTests/*.swift"))
    write("dol", hex_literals("Tests/EMVTests/DOLTests.swift") + profile_values("pdol") + profile_values("cdol1")
          + profile_values("cdol2"))
    write("cvm", hex_literals("Tests/EMVTests/CVMTests.swift") + profile_values("cvmList"))
    write("atr", hex_literals("Tests/EMVTests/ATRTests.swift", "Tests/CardIOTests/ISO7816ATRTests.swift") + profile_values("atr"))
    write("t1", t1_seeds())
    write("vpcd", vpcd_seeds())
    # Query values as sent, still encoded: what the decoder reads.
    values = []
    for url in urls:
        query = url.split("?", 1)[1] if "?" in url else url.split("://", 1)[-1]
        for item in query.split("&"):
            values.append(item.split("=", 1)[-1])
    write("percent", [v.encode() for v in values if "%" in v] + [b"a%20b%2B%26c", b"%E2%82%AC+%3D", b"%C3%28", b"%zz", b"caf\xc3\xa9"])
    write("viva", [u.encode() for u in urls if u.lower().startswith("vivapayclient")])
    write("billpocket", [u.encode() for u in urls if u.lower().startswith("billpocket")])
    write("scenario", [text.encode() for _, text in scenario_documents()])
    write("profile", [t.encode() for t in card_profiles()])
    write("capk", capk_seeds())
    write("json", json_seeds([u for u in urls if "{{" not in u]))
    write("worldline", worldline_seeds())
    write("citcon", citcon_seeds())
    write("trace", trace_seeds())
    write("iso8583", iso8583_seeds())


if __name__ == "__main__":
    sys.exit(main())
