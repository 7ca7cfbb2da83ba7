#!/usr/bin/env python3
"""Writes corpus.json: hostile requests for cardbenchd, as data (see README.md).

Deterministic: no clock, no unseeded randomness; running it twice gives the same bytes.
Standard library only.

    python3 Tests/DaemonTests/Hostile/generate.py            # writes corpus.json beside this file
    python3 Tests/DaemonTests/Hostile/generate.py --check    # exits 1 if corpus.json is stale
    python3 Tests/DaemonTests/Hostile/generate.py --include-unbounded
        # also adds profile paths that are endless or huge (/dev/zero, /dev/urandom, /proc/kcore):
        # today they make the daemon read without limit (see README.md); off by default.

Every entry must be answered at once by a daemon in demo mode (`cardbenchd --demo`, terminal
bench1, the demo card always present). The generator refuses to write an entry that could wait
on a person: a Viva `cancel` without a referenceNumber (keypad prompt), a sale with
withInstallments=true and no preferredInstallments the demo card takes without asking (2-12),
`wait: false`, /v1/events, POSTs to .../abort, POST/DELETE on /v1/terminals/bench1/card, a valid
keypad or host-queue body on bench1, and a /v1/clock body that would move the clock.
"""

import base64
import json
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus.json")

MAX_REQUEST = 200 * 1024
MAX_CORPUS = 3 * 1024 * 1024

CATEGORIES = [
    "encodings", "lengths", "control-characters", "numbers", "schemes", "injection", "duplicates",
    "pan-looking", "redirects", "api-bodies", "methods-paths",
]

DEMO_PAN = "4761739001010010"
# 64 lower-case hex characters: the shape of a user token, but no user has it (token error).
TOKEN = "0123456789abcdef" * 4
CB = "mycallbackscheme://result"

# ---------------------------------------------------------------------------------------------
# Helpers


def pct(text, keep=""):
    """Percent-encodes every byte of text's UTF-8 form except unreserved ones and `keep`."""
    out = []
    for b in text.encode("utf-8"):
        c = chr(b)
        if c.isascii() and (c.isalnum() or c in "-._~" or c in keep):
            out.append(c)
        else:
            out.append("%%%02X" % b)
    return "".join(out)


def pct_all(text):
    """Every byte as %XX, letters included."""
    return "".join("%%%02X" % b for b in text.encode("utf-8"))


def q(pairs):
    """Joins (name, raw value) pairs and raw strings with '&'. Values are sent as given."""
    parts = []
    for p in pairs:
        if isinstance(p, tuple):
            parts.append(p[0] + "=" + p[1])
        else:
            parts.append(p)
    return "&".join(parts)


def viva(pairs, base="vivapayclient://pay/v1?"):
    return base + q(pairs)


def vsale(ctid, amount="1200", extra=(), callback=CB, action="sale"):
    """A valid Viva sale (approves in demo mode), plus extra pairs."""
    pairs = [("callback", callback), ("merchantKey", "K"), ("appId", "com.example.pos"), ("action", action),
             ("amount", amount)]
    if ctid is not None:
        pairs.append(("clientTransactionId", ctid))
    return viva(pairs + list(extra))


def vwith(field, value, ctid):
    """A Viva request where `field` carries `value`, with the rest of an action that uses it."""
    if field in ("referenceNumber",):
        return viva([("callback", CB), ("action", "capture_pre_auth"), ("referenceNumber", value)])
    if field in ("orderCode", "shortOrderCode", "txnDateFrom", "txnDateTo"):
        return viva([("callback", CB), ("action", "cancel"), ("referenceNumber", "999999"), (field, value)])
    if field in ("command", "batchName", "batchId"):
        pairs = [("callback", CB), ("action", "batch"), ("command", "open")]
        pairs = [p for p in pairs if p[0] != field] + [(field, value)]
        return viva(pairs)
    if field == "callback":
        return viva([("callback", value), ("action", "sale"), ("amount", "1200"), ("clientTransactionId", ctid)])
    if field == "action":
        return viva([("callback", CB), ("action", value), ("amount", "1200"), ("clientTransactionId", ctid)])
    if field == "amount":
        return viva([("callback", CB), ("action", "sale"), ("amount", value), ("clientTransactionId", ctid)])
    if field == "clientTransactionId":
        return viva([("callback", CB), ("action", "sale"), ("amount", "1200"), ("clientTransactionId", value)])
    if field == "preferredInstallments":
        return vsale(ctid, extra=[("withInstallments", "false"), (field, value)])
    return vsale(ctid, extra=[(field, value)])


def bp(pairs, prefix="billpocket://"):
    return prefix + q(pairs)


BP_VENTA = [("transaction", "venta"), ("usertoken", TOKEN), ("amount", "100.00"), ("identifier", "order-1"),
            ("urlScheme", "Sender")]
BP_DEVOLUCION = [("transaction", "devolucion"), ("usertoken", TOKEN), ("identifier", "refund-1"),
                 ("transactionId", "7203712345678901"), ("urlScheme", "Sender")]
BP_REFUND_ONLY = {"transactionId"}


def bwith(field, value, name=None):
    """A Billpocket request (venta, or devolucion for transactionId) with `field` set to `value`."""
    name = name or field
    base = BP_DEVOLUCION if field in BP_REFUND_ONLY else BP_VENTA
    pairs = [p for p in base if p[0].lower() != field.lower()]
    if field.lower() in ("usertoken", "pin"):
        pairs = [p for p in pairs if p[0] != "usertoken"]
    return bp(pairs + [(name, value)])


def luhn_complete(partial):
    digits = [int(c) for c in partial]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return partial + str((10 - total % 10) % 10)


def luhn_ok(number):
    digits = [int(c) for c in number]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def make_pans():
    rng = random.Random(20240611)
    prefixes = ["4", "51", "37", "6011", "35", "62", "2221", "4000", "5555", "34"]
    pans = []
    for length in range(13, 20):
        for prefix in prefixes[:3]:
            body = prefix + "".join(str(rng.randrange(10)) for _ in range(length - 1 - len(prefix)))
            pans.append(luhn_complete(body))
    assert all(luhn_ok(p) for p in pans) and luhn_ok(DEMO_PAN)
    return pans


def spaced(pan, sep=" "):
    return sep.join(pan[i:i + 4] for i in range(0, len(pan), 4))


# ---------------------------------------------------------------------------------------------
# A model of the Viva parser, only to refuse entries that would wait for the keypad.

QUERY_CHARS = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?%")
HEX = set(b"0123456789ABCDEFabcdef")


def pdecode(text):
    raw = text.encode("utf-8", "surrogatepass")
    out = bytearray()
    i = 0
    while i < len(raw):
        b = raw[i]
        if b == 0x25:
            if i + 2 >= len(raw) or raw[i + 1] not in HEX or raw[i + 2] not in HEX:
                return None
            out.append(int(raw[i + 1:i + 3], 16))
            i += 3
        elif b in QUERY_CHARS:
            out.append(b)
            i += 1
        else:
            return None
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return None


def viva_items(url):
    """The decoded items of a Viva URL that passes the URL, escape, callback and duplicate rules;
    None when one of those rules refuses it (then the daemon answers without a card)."""
    if not url:
        return None
    qi = url.find("?")
    before = url if qi < 0 else url[:qi]
    hi = before.find("#")
    base = before if hi < 0 else before[:hi]
    si = base.find("://")
    if si < 0:
        return None
    scheme, rest = base[:si], base[si + 3:]
    sl = rest.find("/")
    host, path = (rest, "") if sl < 0 else (rest[:sl], rest[sl:])
    if scheme.lower() != "vivapayclient" or host.lower() != "pay" or path != "/v1":
        return None
    if len(base) == len(url):
        query = ""
    else:
        if url[len(base)] == "#":
            return None
        query = url[len(base) + 1:]
    if "#" in query:
        return None
    items = []
    for piece in query.split("&"):
        if not piece:
            continue
        name, _, value = piece.partition("=")
        dn, dv = pdecode(name), pdecode(value)
        if dn is None or dn == "" or dv is None:
            return None
        items.append((dn, dv))
    names = [n for n, _ in items]
    if len(set(names)) != len(names):
        return None
    d = dict(items)
    cb = d.get("callback", "")
    if not cb or "#" in cb or not re.match(r"^[A-Za-z][A-Za-z0-9+.-]*(:|$)", cb):
        return None
    return d


def viva_may_prompt(url):
    d = viva_items(url)
    if d is None:
        return False
    action = d.get("action", "")
    if action == "cancel" and d.get("referenceNumber", "") == "":
        return True
    if action in ("sale", "pre_auth") and d.get("withInstallments", "").lower() == "true":
        def whole(text, digits):
            if not (text and text.isascii() and text.isdigit()) or len(text.lstrip("0")) > digits:
                return None
            return int(text)
        amount = whole(d.get("amount", ""), 12)
        if not amount:
            return False  # refused: amount is required and > 0
        tip = 0
        if d.get("tipAmount", ""):
            tip = whole(d["tipAmount"], 12)
            if tip is None or tip > amount:
                return False
        p = d.get("preferredInstallments", "")
        if p:
            n = whole(p, 3)
            if n is None or n > 999:
                return False  # refused before the card
            if 2 <= n <= 12:
                return False  # taken without asking (the demo card allows up to 12)
        if tip > 0:
            return False  # refused: no tip with instalments
        return True
    return False


# ---------------------------------------------------------------------------------------------
# Safety checks on API bodies sent to bench1.

def json_variants(text):
    """The body parsed with first-wins and with last-wins duplicate keys; [] if it is not JSON."""
    out = []
    for pick in ("first", "last"):
        def hook(pairs, pick=pick):
            d = {}
            for k, v in pairs:
                if pick == "first" and k in d:
                    continue
                d[k] = v
            return d
        try:
            out.append(json.loads(text, object_pairs_hook=hook))
        except (ValueError, RecursionError):
            return []
    return out


def is_int(v):
    """Whether Swift would decode v as an Int (Int64), leniently (1.0 counts)."""
    if isinstance(v, bool):
        return False
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    return isinstance(v, int) and -2**63 <= v < 2**63


def keypad_accepts(body):
    for v in json_variants(body):
        if not isinstance(v, dict):
            continue
        present = [k for k in ("pin", "select") if v.get(k) is not None] + \
                  [k for k in ("confirm", "cancel") if v.get(k) is True]
        if len(present) != 1:
            continue
        k = present[0]
        if k == "pin" and isinstance(v["pin"], str) and 4 <= len(v["pin"]) <= 12 and v["pin"].isascii() and v["pin"].isdigit():
            return True
        if k == "select" and is_int(v["select"]) and v["select"] >= 1:
            return True
        if k in ("confirm", "cancel"):
            return True
    return False


def host_queue_accepts(body):
    for v in json_variants(body):
        if not isinstance(v, dict):
            continue
        present = [k for k in ("code", "delayMs") if v.get(k) is not None] + (["unavailable"] if v.get("unavailable") is True else [])
        if len(present) != 1:
            continue
        k = present[0]
        if k == "code" and isinstance(v["code"], str) and len(v["code"]) == 2 and v["code"].isascii() and v["code"].isalnum():
            return True
        if k == "delayMs" and is_int(v["delayMs"]) and 1 <= v["delayMs"] <= 600000:
            return True
        if k == "unavailable":
            return True
    return False


def clock_moves(body):
    for v in json_variants(body):
        if not isinstance(v, dict):
            continue
        s, a = v.get("set"), v.get("advanceSeconds")
        if s is not None and a is None and isinstance(s, str) and re.match(r"^\s*[+-]?\d{4,}-\d\d-\d\dT", s):
            return True
        if a is not None and s is None and is_int(a) and 0 <= a <= 316224000:
            return True
    return False


def open_body_waits_false(body):
    for v in json_variants(body):
        if isinstance(v, dict) and ("wait" in v and v["wait"] in (False, 0, "false", "0")):
            return True
    return False


def open_body_urls(body):
    urls = []
    for v in json_variants(body):
        if isinstance(v, dict) and isinstance(v.get("url"), str):
            urls.append(v["url"])
    return urls


# ---------------------------------------------------------------------------------------------

class Corpus:
    def __init__(self):
        self.entries = []
        self.ids = set()
        self.counters = {}

    def _id(self, base):
        n = self.counters.get(base, 0) + 1
        self.counters[base] = n
        ident = "%s-%d" % (base, n)
        assert ident not in self.ids
        self.ids.add(ident)
        return ident

    def open(self, category, base, url, note):
        assert category in CATEGORIES, category
        assert not viva_may_prompt(url), ("would prompt on the keypad", base, url[:200])
        self.entries.append({"id": self._id(base), "category": category,
                             "request": {"kind": "open", "url": url, "terminal": "bench1"}, "note": note})

    def http(self, category, base, method, path, note, body=None, content_type="application/json", raw=None,
             headers=None):
        assert category in CATEGORIES, category
        assert method in ("GET", "POST", "DELETE", "PUT", "PATCH"), method
        request = {"kind": "http", "method": method, "path": path}
        h = dict(headers or {})
        if content_type is not None:
            h["Content-Type"] = content_type
        request["headers"] = h
        if raw is not None:
            request["bodyBase64"] = base64.b64encode(raw).decode("ascii")
            text = raw.decode("utf-8", "replace")
        else:
            request["body"] = body if body is not None else ""
            text = request["body"]
        self._check_http(method, path, text)
        self.entries.append({"id": self._id(base), "category": category, "request": request, "note": note})

    @staticmethod
    def _check_http(method, path, text):
        p = path.split("?")[0]
        low = p.lower()
        assert "events" not in low, path
        assert "abort" not in low, path
        segs = p.split("/")
        if "card" in low:
            # No POST/DELETE on bench1's card, nor on any spelling a client or router could turn into it.
            if method in ("POST", "DELETE"):
                assert re.match(r"^/v1/terminals/[A-Za-z0-9_-]+/card$", p) and segs[3] != "bench1" \
                    and "bench1" != segs[3].lower() or segs[3] in ("BENCH1",), path
                assert "." not in p and "%" not in p and "//" not in p, path
        if method == "POST" and p.endswith("/keypad"):
            assert not keypad_accepts(text), ("keypad body would be accepted", path, text[:200])
        if method == "POST" and p.endswith("/host-queue"):
            assert not host_queue_accepts(text), ("host-queue body would be accepted", path, text[:200])
        if method == "POST" and "clock" in low:
            assert not clock_moves(text), ("clock body would move the clock", text[:200])
        if method == "POST" and p == "/v1/open":
            assert not open_body_waits_false(text), text[:200]
            for u in open_body_urls(text):
                assert not viva_may_prompt(u), ("would prompt", u[:200])

    def write(self, path):
        for e in self.entries:
            size = len(json.dumps(e["request"], ensure_ascii=True))
            assert size < MAX_REQUEST, (e["id"], size)
        text = json.dumps(self.entries, ensure_ascii=True, indent=1) + "\n"
        assert len(text.encode()) < MAX_CORPUS, len(text.encode())
        return text


# ---------------------------------------------------------------------------------------------
# Categories

def encodings(c):
    cat = "encodings"
    bad_escapes = [
        ("%2541", "double-encoded 'A': decoded once it is the text %41"),
        ("%252523", "triple-encoded '#'"),
        ("%25", "an encoded '%' alone"),
        ("%", "a bare '%' at the end of a value"),
        ("abc%", "a '%' at the very end"),
        ("%4", "a '%' with one hex digit"),
        ("%G1", "a '%' with a non-hex digit"),
        ("%zz", "a '%' with letters outside hex"),
        ("%%41", "'%%'"),
        ("%-1", "a signed escape"),
        ("%+1", "a '+' inside an escape"),
        ("%%", "two bare '%'"),
        ("%0", "a truncated escape"),
        ("%u0041", "an IIS-style %u escape"),
        ("%uD83D%uDE00", "%u surrogate pair escapes"),
        ("%C0%AF", "an over-long UTF-8 '/'"),
        ("%E0%80%AF", "a 3-byte over-long '/'"),
        ("%F0%80%80%AF", "a 4-byte over-long '/'"),
        ("%C0%80", "an over-long NUL (modified UTF-8)"),
        ("%C0%AE%C0%AE%C0%AF", "over-long '../'"),
        ("%C3%28", "an invalid 2-byte sequence"),
        ("%C3", "a truncated 2-byte sequence"),
        ("%E2%82", "a truncated 3-byte sequence"),
        ("%FF", "byte 0xFF, never valid UTF-8"),
        ("%FE%FF", "a UTF-16 BOM as bytes"),
        ("%ED%A0%80", "an encoded UTF-16 surrogate (CESU)"),
        ("%ED%A0%BD%ED%B8%80", "an emoji as CESU-8 surrogate pair"),
        ("%F4%90%80%80", "a code point above U+10FFFF"),
        ("%F8%88%80%80%80", "a 5-byte sequence"),
        ("%80", "a lone continuation byte"),
        ("%3a%2f%2F", "lower- and upper-case escapes mixed"),
    ]
    for i, (v, why) in enumerate(bad_escapes):
        field = ["clientTransactionId", "amount", "callback", "action", "merchantKey", "appId"][i % 6]
        c.open(cat, "viva-%s-escape" % field.lower(), vwith(field, v, "enc-v-%d" % i),
               "Viva %s with %s (%s); must be refused or decoded exactly once, never 5xx" % (field, why, v))
    for i, (v, why) in enumerate(bad_escapes[::2]):
        field = ["reference", "identifier", "amount", "urlScheme", "email", "transaction", "usertoken", "transactionId"][i % 8]
        c.open(cat, "bp-%s-escape" % field.lower(), bwith(field, v), "Billpocket %s with %s (%s)" % (field, why, v))
    # Escapes in names and in the scheme part.
    for name, why in [("%61ction", "'action' with its first letter encoded"), ("%41ction", "'Action' encoded (case-sensitive)"),
                      ("act%69on", "an encoded letter mid-name"), ("%FFaction", "a name with an invalid byte"),
                      ("%", "a name that is a bare '%'"), ("%00", "a NUL name")]:
        c.open(cat, "viva-name-escape", viva([("callback", CB), (name, "sale"), ("amount", "1200"),
                                              ("clientTransactionId", "enc-name-" + pct(name))]),
               "Viva parameter name %s: %s" % (name, why))
    for name in ["%75sertoken", "USER%54OKEN", "userto%E2%84%AAen", "%FFusertoken"]:
        pairs = [p for p in BP_VENTA if p[0] != "usertoken"] + [(name, TOKEN)]
        c.open(cat, "bp-name-escape", bp(pairs),
               "Billpocket token under the name %s (encoded letters; U+212A KELVIN SIGN lower-cases to 'k')" % name)
    c.open(cat, "bp-scheme-kelvin", "billpoc\u212aet://" + q(BP_VENTA[1:] + [("transaction", "venta")]),
           "scheme 'billpoc\u212aet' (KELVIN SIGN): Swift lowercased() turns it into 'billpocket', which no iOS would route")
    c.open(cat, "viva-scheme-encoded", "%76ivapayclient://pay/v1?" + q([("callback", CB), ("action", "sale"), ("amount", "1200")]),
           "an encoded letter in the scheme")
    c.open(cat, "viva-host-encoded", "vivapayclient://p%61y/v1?" + q([("callback", CB), ("action", "sale"), ("amount", "1200")]),
           "an encoded letter in the host")
    c.open(cat, "viva-path-encoded", "vivapayclient://pay/%76%31?" + q([("callback", CB), ("action", "sale"), ("amount", "1200")]),
           "an encoded path /v1")
    c.open(cat, "viva-path-encoded-slash", "vivapayclient://pay%2Fv1?" + q([("callback", CB), ("action", "sale"), ("amount", "1200")]),
           "an encoded slash between host and path")
    # Unicode: RTL, zero-width, combining, emoji, homoglyphs; encoded (legal) and raw (must be refused).
    uni = [
        ("\u202e", "RIGHT-TO-LEFT OVERRIDE"), ("\u200f", "RIGHT-TO-LEFT MARK"), ("\u2066abc\u2069", "bidi isolates"),
        ("\u200b", "ZERO WIDTH SPACE"), ("\u200d", "ZERO WIDTH JOINER"), ("\ufeff", "BOM / ZWNBSP"),
        ("\u2060", "WORD JOINER"), ("e" + "\u0301" * 200, "one 'e' with 200 combining accents (zalgo)"),
        ("\u0301abc", "a value starting with a combining mark"), ("\U0001F44D", "emoji"),
        ("\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466", "a ZWJ family emoji (1 grapheme, 7 scalars)"),
        ("\U0001F1EB\U0001F1F7", "a flag (regional indicators)"), ("\u2028", "LINE SEPARATOR"), ("\u2029", "PARAGRAPH SEPARATOR"),
        ("\u0455ale", "Cyrillic 's' in 'sale'"), ("\uff53\uff41\uff4c\uff45", "fullwidth 'sale'"),
        ("\U000E0041", "a tag character"), ("\uFFFD", "REPLACEMENT CHARACTER"), ("\uFFFF", "a noncharacter"),
        ("\U0010FFFF", "the last code point"), ("\u00a0", "NO-BREAK SPACE"), ("\u3000", "IDEOGRAPHIC SPACE"),
    ]
    for i, (text, why) in enumerate(uni):
        field = ["clientTransactionId", "action", "merchantKey", "callback"][i % 4]
        value = ("myapp" + text + "://r") if field == "callback" else text
        c.open(cat, "viva-unicode-%s" % field.lower(), vwith(field, pct(value, keep=":/"), "enc-u-%d" % i),
               "Viva %s holding %s, percent-encoded as the rules require" % (field, why))
    for i, (text, why) in enumerate(uni[:12]):
        field = ["clientTransactionId", "merchantKey", "amount"][i % 3]
        c.open(cat, "viva-raw-unicode-%s" % field.lower(), vwith(field, "x" + text, "enc-r-%d" % i),
               "Viva %s with raw (unencoded) %s: must be refused naming the parameter and position" % (field, why))
    for i, (text, why) in enumerate(uni[::2]):
        field = ["reference", "identifier", "email"][i % 3]
        value = ("a" + text + "@b.example") if field == "email" else text
        c.open(cat, "bp-unicode-%s" % field, bwith(field, pct(value, keep="@")), "Billpocket %s holding %s" % (field, why))
    for i, (text, why) in enumerate(uni[1::3]):
        c.open(cat, "bp-raw-unicode", bwith("reference", "x" + text), "Billpocket reference with raw %s" % why)
    # '+' versus %20
    plus = [("clientTransactionId", "a+b"), ("clientTransactionId", "a%20b"), ("clientTransactionId", "a%2Bb"),
            ("amount", "12+00"), ("amount", "1200+"), ("amount", "+1200"), ("action", "sale+"), ("action", "+sale"),
            ("action", "sa%20le"), ("callback", "my+app://r"), ("callback", "my%20app://r"), ("callback", "myapp://r?a=b+c")]
    for i, (f, v) in enumerate(plus):
        c.open(cat, "viva-plus", vwith(f, v, "enc-p-%d" % i), "Viva %s=%s: '+' is not a space, %%20 is" % (f, v))
    for f, v in [("reference", "a+b"), ("amount", "100+.00"), ("phone", "+52+55+1234"), ("phone", "%2B52%2055"),
                 ("email", "a+b@c.example"), ("urlScheme", "my+app")]:
        c.open(cat, "bp-plus", bwith(f, v), "Billpocket %s=%s" % (f, v))
    # Fully encoded and decode-once checks.
    c.open(cat, "viva-all-encoded", viva([(pct_all("callback"), pct_all(CB)), (pct_all("action"), pct_all("sale")),
                                          (pct_all("amount"), pct_all("1200")), (pct_all("clientTransactionId"), "enc-all")]),
           "every byte of names and values percent-encoded, letters too: valid after one decode")
    c.open(cat, "viva-callback-double", vwith("callback", "myapp%253A%252F%252Fr", "enc-dbl"),
           "a double-encoded callback: decoded once it is 'myapp%3A%2F%2Fr', a bare-scheme-looking text with escapes")


def lengths(c):
    cat = "lengths"
    for n, why in [(0, "empty (same as absent)"), (1, "1 character"), (256, "the ledger's clientReference limit"),
                   (257, "1 over the ledger's 256, within Viva's 2048"), (1000, "1000"), (2047, "1 under"),
                   (2048, "exactly Viva's limit"), (2049, "1 over Viva's limit"), (10000, "10k"), (100000, "100k")]:
        value = ("L%d-" % n + "a" * n)[:n] if n else ""
        c.open(cat, "viva-ctid-len", vwith("clientTransactionId", value, "x"), "Viva clientTransactionId of %d characters: %s" % (n, why))
    for n in (2048, 2049):
        c.open(cat, "viva-ctid-len-multibyte", vwith("clientTransactionId", "%C3%A9" * n, "x"),
               "clientTransactionId of %d 'é' (2 UTF-8 bytes each, 6 URL characters)" % n)
        c.open(cat, "viva-ctid-len-combining", vwith("clientTransactionId", "e%CC%81" * n, "x"),
               "clientTransactionId of %d graphemes that are %d scalars (e + combining acute)" % (n, 2 * n))
        c.open(cat, "viva-ctid-len-emoji", vwith("clientTransactionId", pct("\U0001F44D") * n, "x"),
               "clientTransactionId of %d emoji (4 UTF-8 bytes each)" % n)
    c.open(cat, "viva-ctid-len-zwj", vwith("clientTransactionId", pct("\U0001F468\u200d\U0001F469\u200d\U0001F467") * 300, "x"),
           "300 ZWJ family emoji: 300 graphemes, 1500 scalars, 5400 bytes")
    for name, value, why in [
        ("amount", "9" * 12, "12 digits, the maximum"), ("amount", "1" + "0" * 12, "13 digits"),
        ("amount", "0" * 10000 + "1200", "10000 leading zeros (allowed) then 1200"),
        ("amount", "0" * 100000, "100k zeros"), ("amount", "", "empty amount (required)"),
        ("tipAmount", "0" * 3000 + "1", "tip with 3000 leading zeros"),
        ("referenceNumber", "123456", "6 digits"), ("referenceNumber", "1234567", "7 digits"),
        ("referenceNumber", "0000001", "7 characters with leading zero"), ("referenceNumber", "", "empty"),
        ("orderCode", "1" * 16, "16 digits"), ("orderCode", "1" * 17, "17 digits"),
        ("shortOrderCode", "1" * 10, "10 digits"), ("shortOrderCode", "1" * 11, "11 digits"),
        ("preferredInstallments", "999", "999, the maximum (withInstallments=false)"),
        ("preferredInstallments", "1000", "1000"), ("preferredInstallments", "0" * 500 + "3", "500 leading zeros"),
        ("txnDateFrom", "2" * 10000, "10k date"), ("batchName", "b" * 10000, "10k batch name"),
        ("batchId", "i" * 100000, "100k batch id"), ("command", "o" * 2049, "2049-character command"),
        ("merchantKey", "k" * 100000, "100k merchantKey (deprecated, any value)"),
        ("appId", "a" * 10000, "10k appId"), ("action", "s" * 10000, "10k action"),
    ]:
        if name == "referenceNumber" and value == "":
            url = viva([("callback", CB), ("action", "capture_pre_auth"), ("referenceNumber", "")])
        else:
            url = vwith(name, value, "len-%s-%d" % (name, len(value)))
        c.open(cat, "viva-%s-len" % name.lower(), url, "Viva %s: %s" % (name, why))
    c.open(cat, "viva-callback-len", vwith("callback", "myapp://r/" + "c" * 2038, "len-cb-2048"), "callback of 2048 characters")
    c.open(cat, "viva-callback-len", vwith("callback", "myapp://r/" + "c" * 100000, "len-cb-100k"), "callback of 100k characters")
    c.open(cat, "viva-callback-len", vwith("callback", "a" * 10000, "len-cb-bare"), "a 10k bare scheme name as callback")
    c.open(cat, "viva-name-len", vsale("len-name", extra=[("n" * 10000, "1")]), "an unknown parameter with a 10k name")
    c.open(cat, "viva-1000-params", vsale("len-1000", extra=[("ISV_p%d" % i, str(i)) for i in range(1000)]),
           "1000 distinct unknown parameters (accepted and ignored)")
    c.open(cat, "viva-10000-params", vsale("len-10000", extra=[("p%d" % i, "") for i in range(10000)]),
           "10000 distinct empty parameters")
    c.open(cat, "viva-1000-empty-items", vsale("len-amp", extra=["&" * 1000]), "1000 '&' in a row (empty items are skipped)")
    c.open(cat, "viva-1000-bare", vsale("len-bare", extra=["b%d" % i for i in range(1000)]), "1000 bare names without '='")
    c.open(cat, "viva-1000-same", vsale("len-same", extra=[("dup", str(i)) for i in range(1000)]),
           "one unknown name repeated 1000 times")
    for url, why in [("", "an empty URL"), ("vivapayclient://pay/v1", "no query at all"), ("vivapayclient://pay/v1?", "an empty query"),
                     ("vivapayclient://pay/v1?&", "a query of one '&'"), ("vivapayclient://pay/v1?=", "a lone '='"),
                     ("vivapayclient://", "scheme only"), ("billpocket://", "Billpocket scheme only"),
                     ("billpocket://?", "Billpocket '?' only"), ("billpocket://&&&", "only separators"),
                     ("billpocket://=", "a lone '='")]:
        c.open(cat, "empty-url", url, why)
    bp_limits = [
        ("reference", 256, "a"), ("reference", 257, "a"), ("identifier", 256, "i"), ("identifier", 257, "i"),
        ("email", 256, None), ("email", 257, None), ("phone", 14, "5"), ("phone", 15, "5"),
        ("usertoken", 64, "0"), ("usertoken", 65, "0"), ("devicetoken", 7, "A"), ("devicetoken", 8, "A"),
        ("devicetoken", 12, "A"), ("devicetoken", 13, "A"), ("urlScheme", 50, "s"), ("urlScheme", 51, "s"),
        ("transactionId", 64, "7"), ("transactionId", 65, "7"), ("reference", 100000, "r"), ("identifier", 10000, "i"),
    ]
    for field, n, ch in bp_limits:
        if field == "email":
            value = "a" * (n - len("@b.example")) + "@b.example"
        else:
            value = ch * n
        c.open(cat, "bp-%s-len" % field.lower(), bwith(field, value), "Billpocket %s of %d characters (limit-1/limit/limit+1)" % (field, n))
    for field in ("reference", "identifier"):
        c.open(cat, "bp-%s-len-scalars" % field, bwith(field, pct("\U0001F44D") * 256), "%s of 256 emoji = 256 scalars (at the limit)" % field)
        c.open(cat, "bp-%s-len-scalars" % field, bwith(field, "e%CC%81" * 129),
               "%s of 129 decomposed 'é' = 258 scalars, 129 graphemes (over by scalars)" % field)
    for field in ("transaction", "usertoken", "amount", "identifier", "urlScheme", "tip", "msi"):
        c.open(cat, "bp-empty", bwith(field, ""), "Billpocket %s= (empty is the same as absent)" % field)
    c.open(cat, "bp-1000-params", bp(BP_VENTA + [("x%d" % i, str(i)) for i in range(1000)]), "1000 unknown Billpocket parameters")


CONTROLS = [
    ("%00", "NUL"), ("%0D%0A", "CR LF"), ("%09", "TAB"), ("%7F", "DEL"), ("%C2%85", "NEL (C1)"), ("%C2%9B", "CSI (C1)"),
    ("%0A", "LF"), ("%0D", "CR"), ("%1B%5B2J", "ESC [2J (terminal escape)"), ("%08", "BACKSPACE"), ("%0C", "FF"),
    ("%C2%80", "PAD (C1)"), ("%C2%9F", "APC (C1)"),
]
RAW_CONTROLS = [("\x00", "raw NUL"), ("\r\n", "raw CR LF"), ("\t", "raw TAB"), ("\x7f", "raw DEL"), ("\x85", "raw NEL"),
                ("\x9b", "raw CSI")]

VIVA_FIELDS = ["callback", "merchantKey", "appId", "action", "amount", "tipAmount", "clientTransactionId", "withInstallments",
               "preferredInstallments", "referenceNumber", "orderCode", "shortOrderCode", "txnDateFrom", "txnDateTo", "command",
               "batchName", "batchId"]
BP_FIELDS = ["transaction", "usertoken", "devicetoken", "amount", "tip", "msi", "reference", "email", "phone", "identifier",
             "urlScheme", "showPhotoButton", "mandatoryPhoto", "comesFromQR", "transactionId"]


def control_characters(c):
    cat = "control-characters"
    k = 0
    for field in VIVA_FIELDS:
        for j in range(3):
            ctl, what = CONTROLS[k % len(CONTROLS)]
            k += 1
            good = {"callback": "myapp://r", "action": "sale", "amount": "1200", "tipAmount": "100", "withInstallments": "false",
                    "preferredInstallments": "3", "referenceNumber": "12", "orderCode": "12", "shortOrderCode": "12",
                    "command": "open"}.get(field, "v")
            value = [ctl + good, good + ctl, good[:1] + ctl + good[1:]][j]
            c.open(cat, "viva-%s-ctl" % field.lower(), vwith(field, value, "ctl-v-%d" % k),
                   "Viva %s with an encoded %s (%s)" % (field, what, ["before", "after", "inside"][j]))
        raw, what = RAW_CONTROLS[k % len(RAW_CONTROLS)]
        k += 1
        c.open(cat, "viva-%s-rawctl" % field.lower(), vwith(field, "v" + raw + "v", "ctl-raw-%d" % k),
               "Viva %s with a %s, unencoded: must be refused" % (field, what))
    for field in BP_FIELDS:
        for j in range(3):
            ctl, what = CONTROLS[k % len(CONTROLS)]
            k += 1
            good = {"transaction": "venta", "usertoken": TOKEN, "devicetoken": "TW27CDGS23", "amount": "100.00", "tip": "1.00",
                    "msi": "3", "email": "a@b.example", "phone": "5512345678", "urlScheme": "Sender",
                    "showPhotoButton": "false", "mandatoryPhoto": "false", "comesFromQR": "true",
                    "transactionId": "7203712345678901"}.get(field, "v")
            value = [ctl + good, good + ctl, good[:1] + ctl + good[1:]][j]
            c.open(cat, "bp-%s-ctl" % field.lower(), bwith(field, value),
                   "Billpocket %s with an encoded %s (%s)" % (field, what, ["before", "after", "inside"][j]))
        raw, what = RAW_CONTROLS[k % len(RAW_CONTROLS)]
        k += 1
        c.open(cat, "bp-%s-rawctl" % field.lower(), bwith(field, "v" + raw + "v"), "Billpocket %s with a %s, unencoded" % (field, what))
    for raw, what in RAW_CONTROLS:
        c.open(cat, "viva-scheme-rawctl", "vivapay" + raw + "client://pay/v1?" + q([("callback", CB), ("action", "sale"), ("amount", "1200")]),
               "a %s inside the scheme" % what)
        c.open(cat, "viva-separator-rawctl", "vivapayclient://pay/v1?callback=" + CB + "&" + raw + "action=sale&amount=1200",
               "a %s between items" % what)
        c.open(cat, "bp-scheme-rawctl", raw + "billpocket://" + q(BP_VENTA), "a %s before the scheme" % what)
    c.open(cat, "viva-trailing-crlf", vsale("ctl-trail") + "\r\n", "a URL ending in a raw CR LF (as if read from a line)")
    c.open(cat, "viva-header-split", vsale("ctl-split") + "%0D%0AX-Injected:%201", "an encoded CR LF and a header line after the query")
    c.open(cat, "viva-name-ctl", vsale("ctl-name", extra=[("a%00b", "1")]), "a parameter name with an encoded NUL")
    c.open(cat, "bp-name-ctl", bp(BP_VENTA + [("a%0Ab", "1")]), "a Billpocket parameter name with an encoded LF")


def numbers(c):
    cat = "numbers"
    amounts = [
        ("-1", "negative"), ("-1200", "negative"), ("0", "zero"), ("00", "zeros"), ("000000000000", "12 zeros"),
        ("0001200", "leading zeros (allowed)"), ("1200.00", "decimals where cents are expected"), ("12.00", "decimal"),
        ("12,00", "decimal comma"), ("1,200", "grouping"), ("1.200", "European grouping"), ("1e3", "exponent"),
        ("1E3", "exponent"), ("1.2e3", "float exponent"), ("0x4B0", "hex"), ("0X4b0", "hex"), ("4B0", "hex digits"),
        ("0b10010110000", "binary"), ("0o2260", "octal"), ("02260", "octal-looking (decimal with leading 0)"),
        ("999999999999", "the largest"), ("1000000000000", "one over"),
        ("9223372036854775807", "Int64.max"), ("9223372036854775808", "Int64.max + 1"),
        ("-9223372036854775808", "Int64.min"), ("18446744073709551616", "2^64"),
        ("99999999999999999999999999999999999999", "38 nines"), ("%201200", "leading space"), ("1200%20", "trailing space"),
        ("%091200", "leading TAB"), ("1200%0A", "trailing LF"), ("%2B1200", "explicit plus (encoded)"), ("+1200", "literal plus"),
        ("%D9%A1%D9%A2%D9%A0%D9%A0", "Arabic-Indic \u0661\u0662\u0660\u0660"), ("%D9%A3", "Arabic-Indic \u0663"),
        ("%DB%B1%DB%B2%DB%B0%DB%B0", "Extended Arabic-Indic"), ("%E0%A5%A7%E0%A5%A8%E0%A5%A6%E0%A5%A6", "Devanagari"),
        ("%EF%BC%91%EF%BC%92%EF%BC%90%EF%BC%90", "fullwidth \uff11\uff12\uff10\uff10"), ("%C2%B9%C2%B2", "superscripts"),
        ("%E2%91%A0", "circled one"), ("%F0%9D%9F%8F", "mathematical bold one"), ("NaN", "NaN"), ("Infinity", "Infinity"),
        ("-0", "negative zero"), ("0.0", "zero as a float"), (".5", "leading point"), ("5.", "trailing point"),
        ("1_200", "underscore grouping"), ("1'200", "Swiss grouping"), ("12%C2%A000", "NO-BREAK SPACE grouping"),
        ("1200%00", "trailing NUL"), ("null", "null"), ("true", "true"), ("%5B1200%5D", "[1200]"),
        ("1201", "stripe-cents table: .01 refer to issuer"), ("1205", ".05 do not honour"), ("1255", ".55 incorrect PIN"),
        ("1265", ".65"), ("1275", ".75"), ("1", "1 cent"),
    ]
    for i, (v, why) in enumerate(amounts):
        c.open(cat, "viva-amount", vwith("amount", v, "num-a-%d" % i), "Viva amount=%s: %s" % (v, why))
    for i, (v, why) in enumerate([("-1", "negative tip"), ("1201", "tip over amount"), ("1200", "tip equal to amount"),
                                  ("1e2", "exponent"), ("%EF%BC%91", "fullwidth 1"), ("0", "zero"), ("1.00", "decimal"),
                                  ("9223372036854775808", "over Int64")]):
        c.open(cat, "viva-tip", vsale("num-t-%d" % i, extra=[("tipAmount", v)]), "Viva tipAmount=%s: %s" % (v, why))
    for i, (v, why) in enumerate([("-1", "negative"), ("3.0", "decimal"), ("%D9%A3", "Arabic-Indic 3"), ("%EF%BC%93", "fullwidth 3"),
                                  ("1e1", "exponent"), ("0x3", "hex")]):
        c.open(cat, "viva-installments", vsale("num-i-%d" % i, extra=[("withInstallments", "true"), ("preferredInstallments", v)]),
               "withInstallments=true, preferredInstallments=%s (%s): refused before any prompt" % (v, why))
    c.open(cat, "viva-installments", vsale("num-i-tip", extra=[("withInstallments", "TRUE"), ("preferredInstallments", "003"),
                                                               ("tipAmount", "0001")]),
           "withInstallments=TRUE (any case), preferredInstallments=003 and tipAmount=0001: refused, no tip with instalments")
    for i, (v, why) in enumerate([("0", "zero STAN"), ("000000", "all zeros"), ("1000000", "7 digits"), ("-1", "negative"),
                                  ("%D9%A3", "Arabic-Indic 3"), ("1e3", "exponent"), ("%EF%BC%91", "fullwidth 1"), ("999999", "the last STAN"),
                                  ("0x1", "hex")]):
        c.open(cat, "viva-capture-ref", viva([("callback", CB), ("action", "capture_pre_auth"), ("referenceNumber", v),
                                              ("amount", "100")]), "capture_pre_auth referenceNumber=%s: %s" % (v, why))
        c.open(cat, "viva-cancel-ref", viva([("callback", CB), ("action", "cancel"), ("referenceNumber", v), ("amount", "-1")]),
               "cancel referenceNumber=%s (%s), with a negative amount" % (v, why))
    bp_amounts = [
        ("100", "no decimals"), ("100.5", "1 decimal"), ("100.500", "3 decimals"), (".5", "leading point"), ("5.", "trailing point"),
        ("-1.00", "negative"), ("0.00", "zero"), ("0", "zero"), ("1,000.00", "grouping"), ("1e3", "exponent"), ("1005.00", "table decline 05"),
        ("9999999999.99", "the largest"), ("10000000000.00", "one cent over"), ("%EF%BC%91%EF%BC%90%EF%BC%90.00", "fullwidth"),
        ("%D9%A1%D9%A0%D9%A0.00", "Arabic-Indic"), ("100%C2%A0.00", "NO-BREAK SPACE"), ("0x64", "hex"),
        ("99999999999999999999.99", "over Int64 cents"), ("100.00.00", "two points"), ("NaN", "NaN"), ("%2B100.00", "plus sign"),
    ]
    for v, why in bp_amounts:
        c.open(cat, "bp-amount", bwith("amount", v), "Billpocket amount=%s: %s" % (v, why))
    for v, why in [("0.01", "tip pushing 9999999999.99 over")]:
        c.open(cat, "bp-tip-overflow", bp([p for p in BP_VENTA if p[0] != "amount"] + [("amount", "9999999999.99"), ("tip", v)]), why)
    for v in ["-1.00", "1e2", "0.001", "%EF%BC%91"]:
        c.open(cat, "bp-tip", bwith("tip", v), "Billpocket tip=%s" % v)
    for v in ["03", "3.0", "%D9%A3", "%EF%BC%93", "-3", "12.0", "24", "0x3", "%EF%BC%91%EF%BC%92"]:
        c.open(cat, "bp-msi", bwith("msi", v), "Billpocket msi=%s (exactly 0, 3, 6, 9 or 12)" % v)
        c.open(cat, "bp-payments", bwith("payments", v), "Billpocket payments (alias of msi)=%s" % v)


def schemes(c):
    cat = "schemes"
    body = q([("callback", CB), ("action", "sale"), ("amount", "1200"), ("clientTransactionId", "sch")])
    for prefix, why in [
        ("VIVAPAYCLIENT://PAY/v1?", "scheme and host upper case (valid)"), ("VivaPayClient://Pay/v1?", "mixed case (valid)"),
        ("vivapayclient://pay/V1?", "path upper case"), ("vivapayclient:/pay/v1?", "one slash"), ("vivapayclient:pay/v1?", "missing //"),
        ("vivapayclient:///pay/v1?", "three slashes"), ("vivapayclient://pay/v1/?", "trailing slash"), ("vivapayclient://pay/v2?", "v2"),
        ("vivapayclient://pay?", "no path"), ("vivapayclient://user@pay/v1?", "userinfo"), ("vivapayclient://pay:80/v1?", "a port"),
        ("vivapayclient://pay:99999/v1?", "a port out of range"), ("vivapayclient://pay/v1/../v1?", "dot segments"),
        ("vivapayclient://pay//v1?", "double slash"), ("vivapayclient://[::1]/v1?", "IPv6 host"), ("vivapayclient://pay./v1?", "trailing dot"),
        ("vivapayclient2://pay/v1?", "a longer scheme"), ("vivapay-client://pay/v1?", "hyphenated"), ("viva://pay/v1?", "short scheme"),
        (" vivapayclient://pay/v1?", "leading space"), ("vivapayclient ://pay/v1?", "space before ':'"),
        ("vivapayclient\uff1a//pay/v1?", "fullwidth colon"), ("http://pay/v1?", "http"), ("https://pay/v1?", "https"),
        ("HTTPS://pay/v1?", "HTTPS"), ("javascript:alert(1)//pay/v1?", "javascript:"), ("data:text/html,vivapayclient://pay/v1?", "data:"),
        ("file:///pay/v1?", "file:"), ("intent://pay/v1#Intent;scheme=vivapayclient;end?", "Android intent"),
        ("vivapayclient:?", "scheme and '?'"), (":?", "no scheme"), ("://pay/v1?", "empty scheme"), ("?", "only '?'"),
        ("vivapayclient://pay/v1#?", "fragment before query"),
    ]:
        c.open(cat, "viva-url-scheme", prefix + body, "request URL %r: %s" % (prefix, why))
    for url, why in [("vivapayclient", "scheme name only"), ("vivapayclient:", "scheme and colon"), ("cardbench://x", "unknown scheme"),
                     ("BILLPOCKET://" + q(BP_VENTA), "upper-case Billpocket (valid)"), ("BillPocket://?" + q(BP_VENTA), "query form"),
                     ("billpocket:" + q(BP_VENTA), "no //"), ("billpocket:/" + q(BP_VENTA), "one slash"),
                     ("billpocket:///?" + q(BP_VENTA), "empty host then ?"), ("billpocket://pay?" + q(BP_VENTA), "a host then ?"),
                     ("billpocket://user@host:99999/?" + q(BP_VENTA), "userinfo and port before ?"),
                     ("billpocket://[::1]?" + q(BP_VENTA), "IPv6 host before ?"), ("billpocket2://" + q(BP_VENTA), "billpocket2"),
                     ("bill pocket://" + q(BP_VENTA), "a space in the scheme"), ("javascript://" + q(BP_VENTA), "javascript://"),
                     ("mailto:a@b.example", "mailto"), ("about:blank", "about:blank")]:
        c.open(cat, "url-scheme", url, why)
    callbacks = [
        ("javascript:alert(1)", "javascript: URI (a valid scheme name)"), ("JavaScript:alert(document.cookie)", "mixed-case javascript:"),
        ("javascript%3Aalert(1)", "javascript: with an encoded colon"),
        ("data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==", "data: URI"), ("data:,x", "minimal data:"),
        ("file:///etc/passwd", "file: URI"), ("file://localhost/etc/shadow", "file: with a host"),
        ("http://127.0.0.1/cb", "http callback"), ("HTTP://127.0.0.1/cb", "upper-case HTTP"), ("hTtPs://localhost/cb", "mixed-case https"),
        ("http:127.0.0.1/cb", "http: without //"), ("http:/127.0.0.1/cb", "http: with one slash"), ("http:///cb", "http without host"),
        ("http://", "http:// and nothing"), ("https://user:pass@127.0.0.1/cb", "userinfo"), ("http://@127.0.0.1/cb", "empty userinfo"),
        ("http://[::1]/cb", "IPv6 loopback"), ("http://[::1]:99999/cb", "IPv6 with an out-of-range port"),
        ("http://[fe80::1%25eth0]/cb", "IPv6 zone id"), ("http://[::1/cb", "unclosed IPv6 bracket"), ("http://127.0.0.1:0/cb", "port 0"),
        ("http://127.0.0.1:65536/cb", "port 65536"), ("http://127.0.0.1:-1/cb", "negative port"),
        ("http://127.0.0.1:99999999999999999999/cb", "port over Int64"), ("http://127.0.0.1:abc/cb", "non-numeric port"),
        ("ftp://127.0.0.1/x", "ftp"), ("gopher://127.0.0.1:25/_HELO", "gopher smuggling"), ("dict://127.0.0.1:11211/stats", "dict"),
        ("ldap://127.0.0.1/x", "ldap"), ("tel:+525512345678", "tel:"), ("sms:+5255", "sms:"), ("mailto:a@b.example", "mailto"),
        ("about:blank", "about:"), ("blob:null/x", "blob:"), ("vivapayclient://pay/v1?action=sale&amount=1", "a callback that is a Viva request"),
        ("billpocket://transaction=venta", "a callback that is a Billpocket request"), ("1app://r", "scheme starting with a digit"),
        ("-app://r", "scheme starting with '-'"), ("a", "one-letter bare scheme"), ("a:", "scheme and colon"), (":", "a colon"),
        ("myapp:", "no //"), ("myapp:/", "one slash"), ("myapp:///", "three slashes"), ("my_app://r", "underscore in scheme"),
        ("my%20app://r", "encoded space in scheme"), ("%6Dyapp://r", "encoded first letter"), ("intent://r#Intent;end", "with '#'"),
    ]
    for i, (cb, why) in enumerate(callbacks):
        c.open(cat, "viva-callback-scheme", vwith("callback", cb, "sch-cb-%d" % i), "Viva callback %s: %s" % (cb, why))
    for cb, why in [("javascript:alert(1)", "javascript:"), ("JAVASCRIPT", "an app scheme named JAVASCRIPT (valid name)"),
                    ("data:,x", "data:"), ("file:///etc/passwd", "file:"), ("myapp://", "an app with ://"), ("myapp://result", "an app URL"),
                    ("HTTP://127.0.0.1/h", "upper-case http webhook"), ("http://", "no host"), ("http:///h", "empty host"),
                    ("https://u:p@127.0.0.1/h", "userinfo"), ("http://[::1]:99999/h", "bad port"), ("http://127.0.0.1:65536/", "port 65536"),
                    ("ftp://127.0.0.1/", "ftp"), ("1abc", "digit first"), ("a.b-c+d", "all scheme punctuation (valid)"),
                    ("http:127.0.0.1", "no //"), ("http://[::ffff:127.0.0.1]/", "IPv4-mapped IPv6"), ("gopher://127.0.0.1:25/", "gopher")]:
        c.open(cat, "bp-urlscheme", bwith("urlScheme", cb), "Billpocket urlScheme %s: %s" % (cb, why))
    c.open(cat, "bp-urlscheme-refund", bwith("transactionId", "1") .replace("&urlScheme=Sender", "") + "&urlScheme=javascript:x",
           "devolucion (urlScheme optional) with a javascript: urlScheme")


def injection(c):
    cat = "injection"
    payloads = [
        ("x&status=success", "a raw '&status=success' adds a parameter"), ("x%26status%3Dsuccess", "encoded: must stay inside the value"),
        ("x#frag", "raw '#' cuts the query"), ("x%23frag", "encoded '#'"), ("x?y=1", "raw '?'"), ("x%3Fstatus%3Dsuccess", "encoded '?'"),
        ("%26", "an encoded '&' alone"), ("%3D", "an encoded '='"), ("'%3B%20DROP%20TABLE%20txn%3B--", "SQL: '; DROP TABLE txn;--"),
        ("'%20OR%20'1'%3D'1", "SQL: ' OR '1'='1"), ("1)%20UNION%20SELECT%20pan_hash%20FROM%20txn--", "SQL UNION"),
        ("%22%20OR%201%3D1%20--", "SQL with a double quote"), ("$(reboot)", "shell command substitution"),
        ("%60id%60", "shell backticks"), ("x;ls%20-la", "shell ';'"), ("x|id", "shell pipe (raw '|' must be encoded)"),
        ("x%7Cid", "shell pipe, encoded"), ("x%26%26id", "shell &&"), ("%24%7BIFS%7D", "${IFS}"),
        ("../../etc/passwd", "path traversal"), ("..%2F..%2Fetc%2Fpasswd", "encoded traversal"),
        ("..%252F..%252Fetc%252Fpasswd", "double-encoded traversal"), ("%2Fproc%2Fself%2Fenviron", "an absolute path"),
        ("%22%7D%2C%22status%22%3A%22success", "JSON breaking: \"},\"status\":\"success"), ("%5C%22", "backslash quote"),
        ("%5Cu0000", "a JSON-escape-looking text"), ("%3Cscript%3Ealert(1)%3C%2Fscript%3E", "HTML script"),
        ("%24%7Bjndi%3Aldap%3A%2F%2F127.0.0.1%2Fa%7D", "log4j lookup"), ("%7B%7B7*7%7D%7D", "template {{7*7}}"),
        ("%25s%25s%25n", "printf format"), ("%0D%0ALocation%3A%20http%3A%2F%2F127.0.0.1", "CR LF header injection"),
        ("x%00.yaml", "NUL truncation"), ("*", "a star (kept in callbacks)"), ("%2A%2A%2A%2A", "stars like a masked PAN"),
    ]
    for i, (p, why) in enumerate(payloads):
        c.open(cat, "viva-ctid-inject", vwith("clientTransactionId", p + "-%d" % i, "x"), "Viva clientTransactionId: %s" % why)
    for i, (p, why) in enumerate(payloads[::2]):
        c.open(cat, "bp-reference-inject", bwith("reference", p), "Billpocket reference: %s" % why)
        c.open(cat, "bp-identifier-inject", bwith("identifier", p), "Billpocket identifier: %s" % why)
    for i, (p, why) in enumerate(payloads[::5]):
        c.open(cat, "viva-batch-inject", vwith("batchName", p, "x"), "Viva batchName: %s" % why)
        c.open(cat, "viva-merchantkey-inject", vwith("merchantKey", p, "inj-mk-%d" % i), "Viva merchantKey: %s" % why)
    # Callbacks that carry their own result fields: the API's status must not be read from them.
    for i, (cb, why) in enumerate([
        ("myapp://r?status=success", "the callback already has status=success; a declined sale's API status must say failed"),
        ("myapp://r?status=success&message=ok&", "status and message in the callback, ending with '&'"),
        ("myapp%3A%2F%2Fr%3Fstatus%3Dsuccess", "the same, encoded"), ("myapp://r?action=cancel", "an action field in the callback"),
        ("myapp://r?x=1%26status%3Dsuccess", "an encoded '&' inside the callback's own query"),
        ("http://127.0.0.1/cb?status=success", "an http callback with status=success"),
        ("myapp://r?", "a callback ending in '?'"), ("myapp://r&", "a callback ending in '&'"), ("myapp://r?&&", "'?&&'"),
    ]):
        c.open(cat, "viva-callback-fields", viva([("callback", cb), ("action", "sale"), ("amount", "1205"),
                                                  ("clientTransactionId", "inj-cbf-%d" % i)]),
               "%s (amount 1205 declines with 05 in the stripe-cents table)" % why)
    for amt in ["1200%26amount%3D1", "1200&amount=1", "1200#", "1200%23"]:
        c.open(cat, "viva-amount-inject", vwith("amount", amt, "inj-amt-" + pct(amt)), "amount=%s: a second amount smuggled in" % amt)
    for act in ["sale%26amount%3D1", "sale&action=cancel", "sale%00cancel", "sale%0Aaction%3Dcancel"]:
        c.open(cat, "viva-action-inject", vwith("action", act, "inj-act-" + pct(act)), "action=%s" % act)
    for v in ["venta%26transaction%3Ddevolucion", "venta&x=1", "venta%23"]:
        c.open(cat, "bp-transaction-inject", bwith("transaction", v), "Billpocket transaction=%s" % v)
    for v in ["Sender%26result%3Daprobada", "http://127.0.0.1/h?result=aprobada", "http://127.0.0.1/h?statusinfo=&"]:
        c.open(cat, "bp-urlscheme-inject", bwith("urlScheme", v), "Billpocket urlScheme %s: carries its own result fields" % v)
    for t in ["bench1' OR '1'='1", "bench1; DROP TABLE txn", "../bench1", "bench1\u0000", "$(id)"]:
        c.http(cat, "open-terminal-inject", "POST", "/v1/open", "terminal name %r in the open body" % t,
               body=json.dumps({"url": vsale("inj-term"), "terminal": t, "wait": True}))


def duplicates(c):
    cat = "duplicates"
    cases = [
        ([("callback", CB), ("callback", CB)], "callback twice, same value"),
        ([("callback", CB), ("callback", "other://x")], "callback twice, different values"),
        ([("callback", CB), ("callback", "")], "callback then an empty callback"),
        ([("callback", CB), "callback"], "callback then a bare 'callback'"),
        ([("callback", CB), ("action", "sale"), ("action", "sale")], "action twice, same"),
        ([("callback", CB), ("action", "sale"), ("action", "cancel")], "action sale then cancel"),
        ([("callback", CB), ("action", "cancel"), ("action", "sale")], "action cancel then sale"),
        ([("callback", CB), ("action", "sale"), ("action", "")], "action then an empty action"),
        ([("callback", CB), ("action", "sale"), ("Action", "cancel"), ("referenceNumber", "999999")], "action and Action (names are case-sensitive)"),
        ([("callback", CB), ("action", "sale"), ("amount", "1200"), ("amount", "1")], "amount twice"),
        ([("callback", CB), ("action", "sale"), ("amount", "1200"), ("amount", "1200")], "amount twice, same"),
        ([("callback", CB), ("action", "sale"), ("amount", "1200"), ("Amount", "1")], "amount and Amount"),
        ([("callback", CB), ("action", "sale"), ("amount", "1200"), ("AMOUNT", "1")], "amount and AMOUNT"),
        ([("callback", CB), ("action", "sale"), ("amount", "1200"), ("%61mount", "1")], "amount and an encoded 'amount'"),
        ([("callback", CB), ("action", "sale"), ("amount", "1200"), ("amount", "")], "amount then empty amount"),
        ([("callback", CB), ("action", "sale"), ("amount", "1200"), ("tipAmount", "1"), ("tipAmount", "2")], "tipAmount twice"),
        ([("callback", CB), ("action", "sale"), ("amount", "1200"), ("clientTransactionId", "a"), ("clientTransactionId", "b")], "clientTransactionId twice"),
        ([("callback", CB), ("action", "sale"), ("amount", "1200"), ("merchantKey", "a"), ("merchantKey", "b")], "merchantKey twice"),
        ([("callback", CB), ("action", "sale"), ("amount", "1200"), ("foo", "1"), ("foo", "2")], "an unknown name twice"),
        ([("callback", CB), ("action", "sale"), ("amount", "1200"), ("withInstallments", "false"), ("withInstallments", "true")],
         "withInstallments false then true"),
        ([("callback", CB), ("action", "capture_pre_auth"), ("referenceNumber", "1"), ("referenceNumber", "2")], "referenceNumber twice"),
        ([("callback", CB), ("action", "cancel"), ("referenceNumber", "1"), ("referenceNumber", "")], "cancel: referenceNumber then empty"),
        ([("callback", CB), ("action", "batch"), ("command", "open"), ("command", "close")], "batch command twice"),
        ([("callback", CB), ("callback", CB), ("action", "sale"), ("action", "sale"), ("amount", "1"), ("amount", "1")], "everything twice"),
    ]
    for pairs, why in cases:
        c.open(cat, "viva-dup", viva(pairs), "Viva: %s" % why)
    c.open(cat, "viva-dup-query", "vivapayclient://pay/v1?callback=" + CB + "&action=sale&amount=1200?amount=1",
           "a second '?' inside the query")
    c.open(cat, "viva-dup-query", "vivapayclient://pay/v1??callback=" + CB + "&action=sale&amount=1200", "'??'")
    bp_cases = [
        ([("usertoken", TOKEN), ("pin", TOKEN)], "usertoken and pin (alias)"),
        ([("usertoken", TOKEN), ("USERTOKEN", TOKEN)], "usertoken and USERTOKEN"),
        ([("usertoken", TOKEN), ("userToken", "x")], "usertoken and userToken"),
        ([("usertoken", TOKEN), ("pin", TOKEN), ("UserToken", TOKEN)], "three names of one parameter"),
        ([("usertoken", TOKEN), ("msi", "3"), ("payments", "6")], "msi and payments"),
        ([("usertoken", TOKEN), ("amount", "1.00"), ("amount", "2.00")], "amount twice"),
        ([("usertoken", TOKEN), ("amount", "1.00"), ("Amount", "1.00")], "amount and Amount (case-insensitive)"),
        ([("usertoken", TOKEN), ("urlScheme", "a"), ("urlscheme", "b")], "urlScheme and urlscheme"),
        ([("usertoken", TOKEN), ("identifier", "a"), ("IDENTIFIER", "b")], "identifier twice"),
        ([("usertoken", TOKEN), ("transaction", "devolucion")], "transaction venta then devolucion"),
        ([("usertoken", TOKEN), ("devicetoken", "TW27CDGS23"), ("DeviceToken", "TW27CDGS24")], "devicetoken twice"),
        ([("usertoken", TOKEN), ("reference", ""), ("reference", "x")], "an empty reference then a reference"),
        ([("usertoken", TOKEN), ("foo", "1"), ("FOO", "2")], "an unknown name twice, different case"),
    ]
    for extra, why in bp_cases:
        base = [p for p in BP_VENTA if p[0] not in [e[0].lower() for e in extra] and p[0] != "usertoken"]
        if why.startswith("transaction venta then"):
            base = BP_VENTA[:]
            extra = extra[1:]
        c.open(cat, "bp-dup", bp(base + extra), "Billpocket: %s" % why)
    c.open(cat, "bp-dup-forms", "billpocket://transaction=venta?" + q(BP_VENTA), "parameters both before and after a '?'")
    safe1, safe2 = vsale("dup-json-1"), vsale("dup-json-2", amount="1201")
    raw_bodies = [
        ('{"url":%s,"url":%s}' % (json.dumps(safe1), json.dumps(safe2)), "url twice (which one wins?)"),
        ('{"url":%s,"url":null}' % json.dumps(safe1), "url then null"),
        ('{"url":null,"url":%s}' % json.dumps(safe1), "null then url"),
        ('{"url":%s,"url":123}' % json.dumps(safe1), "url then a number"),
        ('{"url":%s,"terminal":"bench1","terminal":"nosuch"}' % json.dumps(safe1), "terminal twice"),
        ('{"url":%s,"terminal":"nosuch","terminal":"bench1"}' % json.dumps(safe1), "terminal twice, other order"),
        ('{"url":%s,"wait":true,"wait":true}' % json.dumps(safe1), "wait twice (both true)"),
        ('{"url":%s,"URL":"x"}' % json.dumps(safe1), "url and URL"),
        ('{"url":%s,"ur\\u006c":%s}' % (json.dumps(safe1), json.dumps(safe2)), "url and an escaped 'url' key"),
    ]
    for body, why in raw_bodies:
        c.http(cat, "open-json-dup", "POST", "/v1/open", "POST /v1/open with duplicate JSON keys: %s" % why, body=body)
    for path, body, why in [
        ("/v1/terminals/bench1/keypad", '{"pin":"12","pin":"1"}', "keypad pin twice (both invalid)"),
        ("/v1/terminals/bench1/keypad", '{"pin":"12","select":0}', "pin and select"),
        ("/v1/terminals/bench1/host-queue", '{"code":"5","code":"051"}', "host-queue code twice (both invalid)"),
        ("/v1/host/accounts", '{"profile":"/nonexistent/a.yaml","profile":"/etc/shadow"}', "profile twice"),
        ("/v1/billpocket/users", '{"name":"dup-a","name":"dup-b"}', "name twice"),
        ("/v1/billpocket/users", '{"name":"dup-c","msi":{"3":100,"3":-1}}', "an msi month twice"),
        ("/v1/billpocket/device-tokens", '{"user":999999,"user":"1"}', "user twice"),
        ("/v1/clock", '{"set":"x","set":"y"}', "set twice (both malformed)"),
        ("/v1/terminals/nosuch/card", '{"profile":"/nonexistent.yaml","profile":"x"}', "card profile twice, unknown terminal"),
    ]:
        c.http(cat, "api-json-dup", "POST", path, "POST %s: %s" % (path, why), body=body)
    for path, why in [("/v1/transactions?limit=1&limit=1000", "limit twice"), ("/v1/transactions?terminal=bench1&terminal=nosuch", "terminal twice"),
                      ("/v1/transactions?limit=1&limit=abc", "a good then a bad limit"),
                      ("/v1/billpocket/device-tokens?user=1&user=2", "user twice"),
                      ("/v1/requests/00000000-0000-0000-0000-000000000000?wait=false&wait=true", "wait twice on an unknown id")]:
        c.http(cat, "query-dup", "GET", path, "GET with repeated query parameters: %s" % why, content_type=None)


def pan_looking(c):
    cat = "pan-looking"
    pans = make_pans()
    forms = [(DEMO_PAN, "the demo card's PAN"), (spaced(DEMO_PAN, "%20"), "the demo PAN with spaces"),
             (spaced(DEMO_PAN, "-"), "the demo PAN with dashes"), (spaced(DEMO_PAN, "."), "the demo PAN with dots"),
             ("x" + DEMO_PAN + "y", "the demo PAN inside text")]
    forms += [(p, "a Luhn-valid %d-digit number" % len(p)) for p in pans[::2]]
    forms += [(spaced(p, "%20"), "a spaced %d-digit Luhn number" % len(p)) for p in pans[1::4]]
    for i, (p, why) in enumerate(forms):
        c.open(cat, "viva-ctid-pan", vwith("clientTransactionId", p, "x"),
               "Viva clientTransactionId = %s: must not be stored in full (a sale with it approves)" % why)
    for i, (p, why) in enumerate(forms[:8]):
        c.open(cat, "viva-callback-path-pan", vwith("callback", "myapp://result/" + p, "pan-cbp-%d" % i), "callback path holds %s" % why)
        c.open(cat, "viva-callback-query-pan", vwith("callback", "myapp://result?card=" + p, "pan-cbq-%d" % i), "callback query holds %s" % why)
    for i, (p, why) in enumerate(forms[:6]):
        for field in ("merchantKey", "appId", "batchName", "txnDateFrom", "unknownPan"):
            c.open(cat, "viva-%s-pan" % field.lower(), vwith(field, p, "pan-%s-%d" % (field, i)), "Viva %s holds %s" % (field, why))
        c.open(cat, "viva-details-pan", viva([("callback", CB), ("action", "transactionDetails"), ("clientTransactionId", p)]),
               "transactionDetails for %s" % why)
        c.open(cat, "viva-name-pan", vsale("pan-name-%d" % i, extra=[(p, "1")]), "a parameter named %s" % why)
    for i, (p, why) in enumerate(forms[:6]):
        for field in ("reference", "identifier", "usertoken", "transactionId"):
            c.open(cat, "bp-%s-pan" % field.lower(), bwith(field, p), "Billpocket %s holds %s" % (field, why))
        c.open(cat, "bp-email-pan", bwith("email", p + "@b.example"), "Billpocket email local part holds %s" % why)
    for p in [DEMO_PAN[:12], DEMO_PAN[:13]]:
        c.open(cat, "bp-devicetoken-pan", bwith("devicetoken", p), "Billpocket devicetoken of PAN digits (%d)" % len(p))
        c.open(cat, "bp-phone-pan", bwith("phone", p), "Billpocket phone of PAN digits (%d)" % len(p))
    c.open(cat, "viva-amount-pan", vwith("amount", DEMO_PAN, "pan-amt"), "amount = the demo PAN (16 digits: refused, and the error quotes it)")
    c.open(cat, "viva-ref-pan", viva([("callback", CB), ("action", "capture_pre_auth"), ("referenceNumber", DEMO_PAN)]),
           "referenceNumber = the demo PAN")
    c.open(cat, "url-pan", DEMO_PAN, "the URL is just the demo PAN (error names the scheme)")
    c.open(cat, "url-pan", DEMO_PAN + "://pay/v1?callback=" + CB, "the demo PAN as the scheme")
    api = [
        ("/v1/billpocket/users", {"name": DEMO_PAN}, "a user named with the demo PAN"),
        ("/v1/billpocket/users", {"name": spaced(DEMO_PAN)}, "a user named with the spaced demo PAN"),
        ("/v1/billpocket/device-tokens", {"user": 1, "alias": DEMO_PAN}, "a device token alias holding the demo PAN"),
        ("/v1/open", {"url": vsale("pan-term"), "terminal": DEMO_PAN, "wait": True}, "the demo PAN as terminal name"),
        ("/v1/open", {"url": vsale("pan-extra"), "pan": DEMO_PAN, "wait": True}, "an extra 'pan' field"),
        ("/v1/terminals/bench1/keypad", {"pin": DEMO_PAN}, "the demo PAN as a PIN (16 digits, over 12)"),
        ("/v1/terminals/bench1/host-queue", {"code": DEMO_PAN}, "the demo PAN as a response code"),
        ("/v1/host/accounts", {"profile": DEMO_PAN}, "the demo PAN as a profile path"),
        ("/v1/host/accounts", {"profile": "/tmp/" + DEMO_PAN + ".yaml"}, "a profile path holding the demo PAN"),
        ("/v1/terminals/nosuch/card", {"profile": DEMO_PAN, "removeAfter": DEMO_PAN}, "card body of PANs (unknown terminal)"),
        ("/v1/clock", {"set": DEMO_PAN}, "the demo PAN as a clock time"),
    ]
    for path, obj, why in api:
        c.http(cat, "api-pan", "POST", path, "POST %s: %s" % (path, why), body=json.dumps(obj))
    for path in ["/v1/transactions/" + DEMO_PAN, "/v1/vouchers/" + DEMO_PAN, "/v1/requests/" + DEMO_PAN,
                 "/v1/terminals/" + DEMO_PAN, "/v1/transactions?terminal=" + DEMO_PAN, "/v1/billpocket/device-tokens?user=" + DEMO_PAN,
                 "/v1/transactions?before=" + DEMO_PAN]:
        c.http(cat, "api-path-pan", "GET", path, "GET with the demo PAN in the path or query", content_type=None)


LOOPBACK_HOSTS = [
    ("127.1", "short IPv4"), ("0x7f000001", "hex IPv4"), ("2130706433", "decimal IPv4"), ("017700000001", "octal IPv4"),
    ("0177.0.0.1", "octal first octet"), ("0x7f.0.0.1", "hex first octet"), ("127.000.000.001", "zero-padded"),
    ("[::ffff:127.0.0.1]", "IPv4-mapped IPv6"), ("[::ffff:7f00:1]", "IPv4-mapped IPv6, hex"), ("[::1]", "IPv6 loopback"),
    ("[0:0:0:0:0:0:0:1]", "IPv6 loopback, long"), ("[::]", "IPv6 any"), ("localhost.", "trailing-dot localhost"),
    ("LOCALHOST", "upper-case localhost"), ("localhost", "localhost"), ("127.0.0.1", "allowed loopback"),
    ("0", "0"), ("0.0.0.0", "any address"), ("169.254.169.254", "cloud metadata"), ("127.0.0.1.nip.io", "DNS to loopback"),
    ("localtest.me", "public DNS name for 127.0.0.1"), ("127.0.0.1%2Eevil.example", "encoded dot"),
    ("%6Cocalhost", "encoded 'l'"), ("%EF%BD%8C%EF%BD%8F%EF%BD%83%EF%BD%81%EF%BD%8C%EF%BD%88%EF%BD%8F%EF%BD%93%EF%BD%94", "fullwidth localhost"),
    ("127.0.0.1%E3%80%82evil.example", "ideographic full stop"),
]
REDIRECT_PATHS = ["/redirect?to=http://169.254.169.254/latest/meta-data/", "/@evil.example", "//evil.example/", "/%2F%2Fevil.example",
                  "/..%2F..%2F..%2Fetc%2Fpasswd", "/?next=//evil.example", "/%5C%5Cevil.example", "/v1/health", "/metrics",
                  "/v1/terminals/bench1/reset", "/v1/transactions?limit=1000"]


def redirects(c):
    cat = "redirects"
    for i, (host, why) in enumerate(LOOPBACK_HOSTS):
        path = REDIRECT_PATHS[i % len(REDIRECT_PATHS)]
        cb = "http://" + host + path
        c.open(cat, "viva-callback-host", vwith("callback", cb, "rd-h-%d" % i),
               "Viva sale called back at %s (%s): only callbacks.allowed_hosts may be requested" % (cb, why))
    for i, path in enumerate(REDIRECT_PATHS):
        for j, host in enumerate(["127.0.0.1", "localhost:8780"]):
            c.open(cat, "viva-callback-path", vwith("callback", "http://" + host + path, "rd-p-%d-%d" % (i, j)),
                   "an allowed loopback host with a redirect-ish path %s: a 3xx answer must not be followed elsewhere" % path)
    for i, (cb, why) in enumerate([
        ("http://127.0.0.1@evil.example/", "userinfo that looks like the host"), ("http://evil.example@127.0.0.1/", "userinfo of another host"),
        ("http://127.0.0.1:80@evil.example/", "port-like userinfo"), ("http://127.0.0.1%40evil.example/", "encoded '@'"),
        ("http://127.0.0.1%2F@evil.example/", "encoded '/' before '@'"), ("http://127.0.0.1%00.evil.example/", "encoded NUL in host"),
        ("http://127.0.0.1%23@evil.example/", "encoded '#' before '@'"), ("http://127.0.0.1:8780%2Fv1%2Fhealth/", "encoded path in port"),
        ("http://127.0.0.1%09/", "encoded TAB in host"), ("https://127.0.0.1/", "https to loopback (TLS to a plain port)"),
        ("http://[::ffff:169.254.169.254]/", "mapped metadata address"), ("http://127.0.0.1:22/", "SSH port"),
    ]):
        c.open(cat, "viva-callback-confuse", vwith("callback", cb, "rd-c-%d" % i), "callback %s: %s" % (cb, why))
    for i, (host, why) in enumerate(LOOPBACK_HOSTS[:18]):
        cb = "http://" + host + "/h"
        if len(cb) <= 50:
            c.open(cat, "bp-webhook-host", bwith("urlScheme", cb), "Billpocket webhook %s (%s)" % (cb, why))
    for cb in ["http://127.0.0.1//evil.example", "http://127.0.0.1/@evil.example", "http://evil.example@127.0.0.1/",
               "http://127.0.0.1@evil.example/", "http://127.1/?next=//evil.example"]:
        c.open(cat, "bp-webhook-path", bwith("urlScheme", cb), "Billpocket webhook with a redirect-ish URL %s" % cb)


def api_bodies(c):
    cat = "api-bodies"
    routes = [
        ("/v1/open", {"url": vsale("api-ok"), "wait": True}),
        ("/v1/terminals/bench1/keypad", {"pin": "12"}),
        ("/v1/terminals/bench1/host-queue", {"code": "5"}),
        ("/v1/host/accounts", {"profile": "/nonexistent/profile.yaml"}),
        ("/v1/billpocket/users", {"name": "hostile"}),
        ("/v1/billpocket/device-tokens", {"user": 999999}),
        ("/v1/terminals/nosuch/card", {"profile": "/nonexistent/profile.yaml"}),
        ("/v1/clock", {"set": "not a date"}),
    ]
    deep_arr = "[" * 10000 + "]" * 10000
    deep_obj = '{"a":' * 10000 + "1" + "}" * 10000
    generic = [
        ("", "application/json", "an empty body"),
        (None, None, "no body and no Content-Type"),
        ("null", "application/json", "null"), ("[]", "application/json", "an empty array"), ("[{}]", "application/json", "an array of an object"),
        ('"url"', "application/json", "a string"), ("42", "application/json", "a number"), ("true", "application/json", "a boolean"),
        ("{}", "application/json", "an empty object"), ("{", "application/json", "unterminated"), ("{}{}", "application/json", "two objects"),
        ("{} x", "application/json", "trailing garbage"), ("{'url':'x'}", "application/json", "single quotes"),
        ('{"a":1,}', "application/json", "a trailing comma"), ('{"a":NaN}', "application/json", "NaN"),
        ('/*c*/{}', "application/json", "a comment"), ('{"a":"\\ud800"}', "application/json", "a lone surrogate escape"),
        ('{"a":"\\u0000"}', "application/json", "a NUL escape"), ('{"a":1e400}', "application/json", "1e400"),
        ('{"a":123456789012345678901234567890}', "application/json", "a 30-digit integer"),
        (deep_arr, "application/json", "10000-deep nested arrays"),
    ]
    for path, good in routes:
        goodtext = json.dumps(good)
        for body, ctype, why in generic:
            c.http(cat, "body" + path.replace("/", "-"), "POST", path, "POST %s with %s" % (path, why), body=body, content_type=ctype)
        for ctype in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml",
                      "application/json; charset=utf-16", ""]:
            c.http(cat, "ctype" + path.replace("/", "-"), "POST", path, "POST %s, JSON body labelled %r" % (path, ctype),
                   body=goodtext, content_type=ctype)
        if path in ("/v1/open", "/v1/billpocket/users", "/v1/clock"):
            c.http(cat, "body" + path.replace("/", "-"), "POST", path, "POST %s with 10000-deep nested objects" % path, body=deep_obj)
        c.http(cat, "utf8" + path.replace("/", "-"), "POST", path, "POST %s with invalid UTF-8 bytes in the body" % path,
               raw=b'{"x":"\xff\xfe\xc3\x28"}')
        c.http(cat, "bom" + path.replace("/", "-"), "POST", path, "POST %s with a UTF-8 BOM first" % path,
               raw=b"\xef\xbb\xbf" + goodtext.encode())
        c.http(cat, "utf16" + path.replace("/", "-"), "POST", path, "POST %s encoded as UTF-16" % path, raw=goodtext.encode("utf-16"))
        extra = dict(good)
        extra.update({"unknown": [1, 2, 3], "__proto__": {"admin": True}, "constructor": None})
        c.http(cat, "extra" + path.replace("/", "-"), "POST", path, "POST %s with unknown extra fields" % path, body=json.dumps(extra))
    c.http(cat, "form-open", "POST", "/v1/open", "a form-encoded open", body="url=" + pct(vsale("api-form")) + "&wait=true",
           content_type="application/x-www-form-urlencoded")
    c.http(cat, "big-open", "POST", "/v1/open", "a 150 KB string in an unknown field",
           body=json.dumps({"url": vsale("api-big"), "wait": True, "pad": "p" * 150000}))
    open_bodies = [
        ({"url": None}, "url null"), ({"url": 123}, "url a number"), ({"url": []}, "url an array"), ({"url": {}}, "url an object"),
        ({"url": True}, "url a boolean"), ({"terminal": "bench1"}, "no url"), ({"url": ""}, "empty url"),
        ({"url": vsale("api-t1"), "terminal": 1}, "terminal a number"), ({"url": vsale("api-t2"), "terminal": ""}, "empty terminal (the first one)"),
        ({"url": vsale("api-t3"), "terminal": None}, "terminal null"), ({"url": vsale("api-t4"), "terminal": "../bench1"}, "terminal ../bench1"),
        ({"url": vsale("api-t5"), "terminal": "bench1\u0000"}, "terminal with NUL"), ({"url": vsale("api-t6"), "terminal": "BENCH1"}, "terminal upper case"),
        ({"url": vsale("api-t7"), "terminal": "bench1 "}, "terminal with a trailing space"),
        ({"url": vsale("api-t8"), "terminal": "x" * 10000}, "a 10k terminal name"),
        ({"url": vsale("api-w1"), "wait": "true"}, "wait a string"), ({"url": vsale("api-w2"), "wait": None}, "wait null"),
        ({"url": vsale("api-w3"), "wait": [True]}, "wait an array"), ({"url": [vsale("api-u1"), vsale("api-u2")]}, "url an array of two"),
        ({"url": "vivapayclient://pay/v1?callback=" + CB + "&action=sale&amount=1200\u0000junk"}, "url with a NUL after a valid request"),
    ]
    for obj, why in open_bodies:
        c.http(cat, "open-shape", "POST", "/v1/open", "POST /v1/open: %s" % why, body=json.dumps(obj))
    c.http(cat, "open-surrogate", "POST", "/v1/open", "url holding an escaped lone surrogate",
           body='{"url":"vivapayclient://pay/v1?callback=a&action=sale&amount=1&clientTransactionId=\\udc80","wait":true}')
    profiles = [
        ("/etc/shadow", "unreadable"), ("/etc/passwd", "readable, not YAML of a card"), ("/proc/self/environ", "the daemon's environment (must not be echoed)"),
        ("/proc/self/cmdline", "NUL-separated"), ("/proc/self/status", "proc text"), ("/proc/self/mem", "unreadable at offset 0"),
        ("/proc/self/maps", "memory map"), ("/dev/null", "empty"), ("/", "the root directory"), ("/root/.ssh/id_rsa", "a private key path"),
        ("../../..", "relative traversal"), ("../../../../../../etc/passwd", "deep traversal"), (".", "the working directory"),
        ("", "empty path"), ("Scenarios/cards", "a directory of profiles"), ("Scenarios/cards/../../Package.swift", "traversal to source"),
        ("Scenarios/cards/visa-credit-cvn10.yaml\u0000.txt", "NUL truncation of a valid profile path"),
        ("Scenarios/cards/visa-credit-cvn10.yaml/", "a valid file with a trailing slash"), ("~/.bashrc", "tilde (not expanded)"),
        ("$HOME/.profile", "a shell variable"), ("file:///etc/passwd", "a file: URL"), ("http://127.0.0.1/p.yaml", "an http URL"),
        ("a/" * 2000 + "x.yaml", "a 4000-character path"), ("x" * 300 + ".yaml", "a file name over NAME_MAX"),
        ("\u0000", "a NUL"), ("Scenarios/cards/*.yaml", "a glob"), ("/proc/self/fd", "a directory of descriptors"),
        ("/sys/kernel/mm/transparent_hugepage/enabled", "a sysfs file"),
    ]
    for p, why in profiles:
        c.http(cat, "accounts-profile", "POST", "/v1/host/accounts", "host/accounts profile %r: %s" % (p[:60], why),
               body=json.dumps({"profile": p}))
    for p, why in profiles[::3]:
        c.http(cat, "card-profile", "POST", "/v1/terminals/nosuch/card", "card profile %r on an unknown terminal: %s" % (p[:60], why),
               body=json.dumps({"profile": p, "removeAfter": "GENERATE AC\u0000", "pinTries": 99}))
    yamls = [
        ("[" * 10000, "10000-deep flow sequences"), ("{a: " * 5000 + "1" + "}" * 5000, "5000-deep flow mappings"),
        ("a: &a [*a]", "a self-referencing alias"), ("*nothing", "an undefined alias"), ("pan: " + DEMO_PAN, "the demo PAN and nothing else"),
        ("pan: !!binary AAAA", "a binary tag"), ("pan: !!python/object:os.system ['id']", "a language-specific tag"),
        ("\t- x", "a tab indent"), ("%YAML 9.9\n---\na: 1", "an unknown YAML version"), ("---\n...\n---\n", "empty documents"),
        ("a: 1\na: 2", "a duplicate key"), ("# " + "c" * 60000, "a 60 KB comment"), ("\u0000", "a NUL"),
        ("name: x\npan: \"" + DEMO_PAN + "\"\npin: \"1234\"", "a partial profile with the demo PAN"),
    ]
    for y, why in yamls:
        text = json.loads('"' + y + '"') if "\\" in y else y
        for path in ("/v1/host/accounts", "/v1/terminals/nosuch/card"):
            c.http(cat, "profile-yaml", "POST", path, "POST %s with profileYAML: %s" % (path, why), body=json.dumps({"profileYAML": text}))
    for obj, why in [({"profile": "visa-credit-cvn10", "profileYAML": "a: 1"}, "both profile and profileYAML"),
                     ({"profile": "visa-credit-cvn10.yml.yaml"}, "a doubled extension"), ({"profile": "VISA-CREDIT-CVN10"}, "a name in upper case"),
                     ({"profile": "../cards/visa-credit-cvn10"}, "a name with a path"), ({"profileYAML": 5}, "profileYAML a number")]:
        c.http(cat, "profile-name", "POST", "/v1/terminals/nosuch/card", "card body %s" % why, body=json.dumps(obj))
    keypad = [{"pin": "12"}, {"pin": "1234567890123"}, {"pin": "12a4"}, {"pin": "\u0661\u0662\u0663\u0664"}, {"pin": 1234},
              {"pin": "1234", "cancel": True}, {"select": 0}, {"select": -1}, {"select": 9223372036854775808}, {"select": "1"},
              {"confirm": False}, {"cancel": False}, {"confirm": "true"}, {"pin": None, "select": None}, {"pin": "1234\u0000"},
              {"pin": "\uff11\uff12\uff13\uff14"}, {"select": 1.5}, {"pin": " 1234"}]
    for obj in keypad:
        c.http(cat, "keypad", "POST", "/v1/terminals/bench1/keypad", "keypad body %s (refused)" % json.dumps(obj)[:80], body=json.dumps(obj))
    hq = [{"code": "5"}, {"code": "051"}, {"code": "\u0660\u0665"}, {"code": "0\u0000"}, {"code": 5}, {"delayMs": 0}, {"delayMs": -1},
          {"delayMs": 600001}, {"delayMs": 9223372036854775808}, {"delayMs": "100"}, {"unavailable": "true"}, {"code": "05", "delayMs": 1},
          {"code": "05", "unavailable": True}, {"unavailable": False}, {"code": ""}, {"code": "\u00e9\u00e9"}, {"code": "0 "}]
    for obj in hq:
        c.http(cat, "host-queue", "POST", "/v1/terminals/bench1/host-queue", "host-queue body %s (refused)" % json.dumps(obj)[:80],
               body=json.dumps(obj))
    users = [{"name": ""}, {"name": "a\u0000b"}, {"name": "x" * 65}, {"name": "x" * 64}, {"name": "\u202eevil"}, {"name": 5},
             {"name": "m", "msi": {"3": -1}}, {"name": "m", "msi": {"x": 1}}, {"name": "m", "msi": {"4": 100}},
             {"name": "m", "msi": {"3": 1e30}}, {"name": "m", "msi": {"99999999999999999999": 1}}, {"name": "m", "msi": []},
             {"name": "m", "msi": {"3": "100"}}, {"name": "m", "msi": None}, {"name": "m", "msi": {"-3": 1}}, {"name": "m", "msi": {" 3": 1}},
             {"name": "m", "msi": {"3.0": 1}}, {"name": "m", "msi": {"\u0663": 1}}]
    for obj in users:
        c.http(cat, "bp-users", "POST", "/v1/billpocket/users", "billpocket user %s" % json.dumps(obj)[:80], body=json.dumps(obj))
    devtok = [{"user": 0}, {"user": -1}, {"user": "1"}, {"user": 9223372036854775807}, {"user": 9223372036854775808}, {"user": 1.5},
              {"user": None}, {"alias": "x"}, {"user": 1, "alias": ""}, {"user": 1, "alias": "a" * 65}, {"user": 1, "alias": "a\u0000"}]
    for obj in devtok:
        c.http(cat, "bp-device-tokens", "POST", "/v1/billpocket/device-tokens", "device-token body %s" % json.dumps(obj)[:80],
               body=json.dumps(obj))
    clock = [{"set": "T99:99:99Z"}, {"set": "yesterday"}, {"set": "1e3"}, {"set": ""}, {"set": 0}, {"advanceSeconds": -1},
             {"advanceSeconds": 316224001}, {"advanceSeconds": 9223372036854775807}, {"advanceSeconds": 9223372036854775808},
             {"advanceSeconds": "60"}, {"advanceSeconds": 1.5e300}, {"set": "x", "advanceSeconds": 1}, {"set": None, "advanceSeconds": None},
             {"set": "\u0000"}, {"advanceSeconds": -9223372036854775808}]
    for obj in clock:
        c.http(cat, "clock", "POST", "/v1/clock", "malformed clock body %s (must not move the clock)" % json.dumps(obj)[:80],
               body=json.dumps(obj))
    for path in ["/v1/terminals/bench1/reset", "/v1/billpocket/users/1/rotate", "/v1/billpocket/users/999999/invalidate"]:
        c.http(cat, "bodyless-route", "POST", path, "POST %s (takes no body) with a 10000-deep body" % path, body=deep_arr)
        c.http(cat, "bodyless-route", "POST", path, "POST %s with invalid UTF-8" % path, raw=b"\xff\xfe\x00")


def methods_paths(c):
    cat = "methods-paths"
    gets = [
        "/v1/nope", "/v2/health", "/V1/HEALTH", "/v1/health/", "/v1//health", "//v1/health", "/v1/health?x=1&x=2", "/v1/health%00",
        "/v1/health%2F", "/v1%2Fhealth", "/./v1/health", "/v1/./health", "/v1/../v1/health", "/%76%31/health", "/v1/health;jsessionid=1",
        "/v1/health%20", "/v1/health%09", "/v1/%2e%2e/v1/health", "/v1/terminals/../../../etc/passwd", "/v1/terminals/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/v1/terminals/bench1%00", "/v1/terminals/bench1%2F..%2Fbench2", "/v1/terminals/..%2Fbench1", "/v1/terminals/%2Fetc%2Fpasswd",
        "/v1/terminals/NUL", "/v1/terminals/CON", "/v1/terminals/" + "t" * 1000, "/v1/terminals/bench1/host-queue/x",
        "/v1/terminals/..%2F..%2F/host-queue", "/v1/transactions/99999999999999999999999", "/v1/transactions/-1", "/v1/transactions/0",
        "/v1/transactions/9223372036854775807", "/v1/transactions/9223372036854775808", "/v1/transactions/-9223372036854775809",
        "/v1/transactions/1e3", "/v1/transactions/0x1", "/v1/transactions/%00", "/v1/transactions/%EF%BC%91", "/v1/transactions/%D9%A1",
        "/v1/transactions/" + "9" * 5000, "/v1/requests/" + "r" * 5000, "/v1/requests/..%2F..%2Fhealth", "/v1/requests/%00",
        "/v1/vouchers/../../etc/passwd", "/v1/vouchers/%2e%2e%2f%2e%2e%2fetc%2fpasswd", "/v1/vouchers/00000000-0000-0000-0000-000000000000",
        "/v1/vouchers/ZZZZZZZZ-0000-0000-0000-000000000000", "/v1/vouchers/" + "v" * 5000,
        "/v1/transactions?limit=0", "/v1/transactions?limit=1001", "/v1/transactions?limit=-1", "/v1/transactions?limit=abc",
        "/v1/transactions?limit=", "/v1/transactions?limit=1e3", "/v1/transactions?limit=%00", "/v1/transactions?limit=99999999999999999999",
        "/v1/transactions?limit=%EF%BC%95", "/v1/transactions?before=0", "/v1/transactions?before=9223372036854775808",
        "/v1/transactions?before=-1", "/v1/transactions?terminal=../bench1", "/v1/transactions?terminal=", "/v1/transactions?terminal=%00",
        "/v1/transactions?terminal=" + "t" * 5000, "/v1/billpocket/device-tokens?user=0", "/v1/billpocket/device-tokens?user=-1",
        "/v1/billpocket/device-tokens?user=abc", "/v1/billpocket/device-tokens?user=99999999999999999999",
        "/v1/requests/00000000-0000-0000-0000-000000000000?wait=maybe", "/metrics/x", "/metrics?format=json", "/v1/terminals/bench1/keypad",
        "/v1/terminals/bench1/reset", "/v1/host/accounts", "/v1/clock?set=1970-01-01T00:00:00Z", "/v1/open?url=vivapayclient://pay/v1",
        "/v1/terminals/bench1/card",
    ]
    for p in gets:
        c.http(cat, "get", "GET", p, "GET %s" % (p if len(p) < 80 else p[:60] + "…(%d)" % len(p)), content_type=None)
    for n in (2048, 8192, 65536, 100000):
        c.http(cat, "long-path", "GET", "/v1/" + "a" * n, "GET a %d-character path" % n, content_type=None)
    c.http(cat, "long-path", "GET", "/v1" + "/a" * 10000, "GET a path of 10000 segments", content_type=None)
    c.http(cat, "long-query", "GET", "/v1/health?" + "&".join("q%d=%d" % (i, i) for i in range(5000)), "GET with 5000 query items",
           content_type=None)
    wrong = [
        ("POST", "/v1/health"), ("PUT", "/v1/health"), ("PATCH", "/v1/health"), ("DELETE", "/v1/health"), ("GET", "/v1/open"),
        ("PUT", "/v1/open"), ("PATCH", "/v1/open"), ("DELETE", "/v1/open"), ("PATCH", "/v1/clock"), ("DELETE", "/v1/clock"),
        ("PUT", "/v1/clock"), ("PUT", "/v1/terminals/bench1/keypad"), ("DELETE", "/v1/terminals/bench1/keypad"),
        ("PATCH", "/v1/terminals/bench1/card"), ("PUT", "/v1/terminals/bench1/card"), ("DELETE", "/v1/terminals/bench1/reset"),
        ("PUT", "/v1/terminals/bench1/host-queue"), ("DELETE", "/v1/terminals/bench1"), ("POST", "/v1/terminals/bench1"),
        ("POST", "/v1/terminals"), ("DELETE", "/v1/transactions"), ("POST", "/v1/transactions/1"), ("DELETE", "/v1/transactions/1"),
        ("PUT", "/v1/billpocket/users"), ("DELETE", "/v1/billpocket/users"), ("GET", "/v1/billpocket/users/1/rotate"),
        ("DELETE", "/v1/billpocket/users/1/invalidate"), ("PATCH", "/v1/billpocket/device-tokens"), ("POST", "/v1/vouchers/x"),
        ("POST", "/metrics"), ("DELETE", "/metrics"), ("POST", "/v1/readers"), ("POST", "/v1/requests/x"),
        ("POST", "/"), ("DELETE", "/"), ("PUT", "/console"),
    ]
    for m, p in wrong:
        c.http(cat, "wrong-method", m, p, "%s %s: not a route (405 or 404 with a JSON body)" % (m, p), body="{}")
    posts = [
        "/v1/billpocket/users/0/rotate", "/v1/billpocket/users/-1/rotate", "/v1/billpocket/users/99999999999999999999/rotate",
        "/v1/billpocket/users/abc/invalidate", "/v1/billpocket/users/1e3/invalidate", "/v1/billpocket/users/%00/rotate",
        "/v1/billpocket/users/9223372036854775807/invalidate", "/v1/billpocket/users/" + "9" * 5000 + "/rotate",
        "/v1/terminals/nosuch/reset", "/v1/terminals/..%2Fbench1/reset", "/v1/terminals/bench1%00/keypad",
        "/v1/terminals/" + "t" * 5000 + "/keypad", "/v1/terminals/..%2F..%2F/host-queue", "/v1/open/", "/v1//open", "/v1/open%00",
    ]
    for p in posts:
        c.http(cat, "post-path", "POST", p, "POST %s" % (p if len(p) < 80 else p[:60] + "…"), body='{"pin":"1"}')
    for m, p, origin in [("GET", "/v1/health", "http://evil.example"), ("POST", "/v1/billpocket/users", "http://evil.example"),
                         ("POST", "/v1/open", "null"), ("GET", "/v1/transactions", "file://"), ("POST", "/v1/open", "http://127.0.0.1"),
                         ("POST", "/v1/terminals/bench1/reset", "https://evil.example:443")]:
        body = json.dumps({"url": vsale("origin-" + pct(origin)), "wait": True}) if p == "/v1/open" else '{"name":"origin"}'
        c.http(cat, "origin", m, p, "%s %s from a web page (Origin: %s): refused before the handler" % (m, p, origin),
               body=body if m == "POST" else None, content_type="application/json" if m == "POST" else None, headers={"Origin": origin})
    for name in ["nosuch", "BENCH1", "bench2", "NUL"]:
        c.http(cat, "card-delete-other", "DELETE", "/v1/terminals/%s/card" % name, "DELETE the card of terminal %r (not bench1)" % name,
               content_type=None)
    for p in ["/v1/terminals/nosuch/host-queue", "/v1/terminals/..%2Fbench1/host-queue"]:
        c.http(cat, "host-queue-delete", "DELETE", p, "DELETE %s" % p, content_type=None)
    # The console's routes (docs/console.md): its files, the list's filters, the card slot, scenario runs.
    for p in ["/console/..%2F..%2Fetc%2Fpasswd", "/console/%00", "/console/index.html%00", "/console/../v1/cards", "/console/" + "c" * 5000,
              "/console/.%2Findex.html", "/v1/transactions?provider=%00", "/v1/transactions?status=APPROVED", "/v1/transactions?from=2026-02-30",
              "/v1/transactions?to=99999-01-01", "/v1/transactions?from=" + "9" * 400, "/v1/transactions?provider=viva&provider=cli",
              "/v1/transactions/1?decode=%00", "/v1/terminals/nosuch/card", "/v1/terminals/..%2Fbench1/card", "/v1/scenario-runs/..%2F..",
              "/v1/scenario-runs/x/junit", "/v1/scenario-runs/" + "r" * 5000]:
        c.http(cat, "console-get", "GET", p, "GET %s" % (p if len(p) < 80 else p[:60] + "…"), content_type=None)
    for body in ['{"path": "../../etc/passwd"}', '{"path": "/etc"}', '{"path": 5}', '{}', '{"path": "\\u0000"}', '{"path": "' + "p" * 5000 + '"}',
                 '{"path": ".", "path": "x"}']:
        c.http(cat, "scenario-run", "POST", "/v1/scenario-runs", "POST /v1/scenario-runs %s" % body[:60], body=body)


def unbounded(c):
    for p, why in [("/dev/zero", "endless zeros"), ("/dev/urandom", "endless random bytes"), ("/proc/kcore", "a file the size of the address space"),
                   ("/proc/self/pagemap", "a huge sparse file")]:
        c.http("api-bodies", "accounts-unbounded", "POST", "/v1/host/accounts",
               "profile %s (%s): must be refused without reading it all" % (p, why), body=json.dumps({"profile": p}))


def build(include_unbounded=False):
    c = Corpus()
    for f in (encodings, lengths, control_characters, numbers, schemes, injection, duplicates, pan_looking, redirects,
              api_bodies, methods_paths):
        f(c)
    if include_unbounded:
        unbounded(c)
    return c


def main(argv):
    include = "--include-unbounded" in argv
    c = build(include)
    text = c.write(OUT)
    counts = {}
    for e in c.entries:
        counts[e["category"]] = counts.get(e["category"], 0) + 1
    if "--check" in argv:
        with open(OUT, encoding="ascii") as f:
            if f.read() != text:
                print("corpus.json is stale: run generate.py", file=sys.stderr)
                return 1
        return 0
    with open(OUT, "w", encoding="ascii", newline="\n") as f:
        f.write(text)
    for cat in CATEGORIES:
        print("%-20s %4d" % (cat, counts.get(cat, 0)))
    print("%-20s %4d  (%d bytes)" % ("total", len(c.entries), len(text.encode())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
