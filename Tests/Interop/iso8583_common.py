"""Shared code of the ISO 8583 peers (iso8583_host.py, iso8583_terminal.py).

Both peers stand apart from cardbench on purpose: messages are packed and unpacked by PyPI's
pyiso8583 (its `default` and `default_ascii` specs), TLV and every cryptogram (ARQC, ARPC,
script MAC) come from pyemv's CVN classes, and card profiles are read from Scenarios/cards by a
small YAML reader here. Nothing is taken from cardbench's Swift code except the conventions the
wire contract fixes (framing, field layout, IAD layouts, method 2's card status update).
"""
import datetime
import decimal
import hmac
import json
import os
import re
import sys
import threading

import yaml

sys.dont_write_bytecode = True  # the peers import each other's module; leave no __pycache__ in the tree

try:
    import warnings

    warnings.simplefilter("ignore")  # cryptography warns that 2-key TDES is old; EMV still uses it
    import iso8583
    from iso8583 import specs as iso_specs
    from pyemv import cvn as pyemv_cvn
    from pyemv import tlv as pyemv_tlv
except ImportError as e:  # pragma: no cover - environment
    sys.stderr.write(f"ENVIRONMENT: pyiso8583 or pyemv is not importable by {sys.executable} ({e}); "
                     "run `make venv` (Tests/Oracle/requirements.txt).\n")
    sys.exit(2)

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CARDS = os.path.normpath(os.path.join(HERE, "..", "..", "Scenarios", "cards"))

SPECS = {"default": iso_specs.default, "default_ascii": iso_specs.default_ascii}
FRAMINGS = ("binary2", "ascii4", "nac")

# Fields an answer to 0100/0200/0400/0420 copies from the request (the wire contract).
ECHO_FIELDS = ("2", "3", "4", "7", "11", "12", "13", "37", "41", "42", "49")
# Response codes cardbench's terminal treats as approvals (Sources/Terminal/ResponseCode.swift).
APPROVAL_CODES = {"00", "08", "10", "11", "Y1", "Y3"}


def h(b):
    return bytes(b).hex().upper()


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc)


# ------------------------------------------------------------------------------------ framing

class PeerClosed(Exception):
    """The other side closed the connection between two frames (a clean end)."""


class FramingError(Exception):
    """The byte stream does not follow the framing: the connection cannot be trusted any more."""


def recv_exact(sock, n):
    """Exactly n bytes. PeerClosed when the stream ends before the first byte, FramingError when
    it ends inside a frame (a half message is not a clean disconnect)."""
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            if not out:
                raise PeerClosed()
            raise FramingError(f"connection closed {len(out)} bytes into a {n}-byte read")
        out += chunk
    return bytes(out)


# The TPDU a NAC terminal sends: ID 60, destination 0001, source 0000 (jPOS NACChannel's habit).
DEFAULT_TPDU = bytes.fromhex("6000010000")


def reply_tpdu(tpdu):
    """NAC: the answer's TPDU has destination (bytes 1-2) and source (bytes 3-4) swapped."""
    return bytes([tpdu[0], tpdu[3], tpdu[4], tpdu[1], tpdu[2]])


class Framer:
    """One of the three framings of the wire contract."""

    def __init__(self, name):
        if name not in FRAMINGS:
            raise ValueError(f"framing must be one of {', '.join(FRAMINGS)}")
        self.name = name

    def frame(self, message, tpdu=None):
        body = (tpdu or DEFAULT_TPDU) + message if self.name == "nac" else message
        if self.name == "ascii4":
            if len(body) > 9999:
                raise FramingError(f"{len(body)} bytes do not fit ascii4's 4 digits")
            return b"%04d" % len(body) + body
        if len(body) > 0xFFFF:
            raise FramingError(f"{len(body)} bytes do not fit a 2-byte length")
        return len(body).to_bytes(2, "big") + body

    def read(self, sock):
        """One frame: (tpdu or None, message bytes)."""
        if self.name == "ascii4":
            header = recv_exact(sock, 4)
            if not header.isdigit():
                raise FramingError(f"ascii4 length header is not 4 digits: {header!r}")
            n = int(header)
        else:
            n = int.from_bytes(recv_exact(sock, 2), "big")
        try:
            body = recv_exact(sock, n) if n else b""
        except PeerClosed:
            raise FramingError(f"connection closed after a header announcing {n} bytes")
        if self.name == "nac":
            if n < 5:
                raise FramingError(f"NAC frame of {n} bytes cannot hold its 5-byte TPDU")
            return body[:5], body[5:]
        return None, body


# ------------------------------------------------------------------------------------ ISO 8583

def pack(fields, spec_name):
    """fields: {"t": MTI, "2": ..., "55": hex}; binary fields (52, 55) as hex in both specs
    (pyiso8583 writes them raw in `default`, as hex characters in `default_ascii`)."""
    raw, _ = iso8583.encode(dict(fields), SPECS[spec_name])  # encode adds the bitmaps: give it a copy
    return bytes(raw)


def unpack(message, spec_name):
    """A decoded message: {"t": MTI, "p": bitmap, "2": ...}, every value a string (binary as hex)."""
    decoded, _ = iso8583.decode(bytearray(message), SPECS[spec_name])
    return decoded


def data_fields(decoded):
    """The data elements of a decoded message by number, in field order (no MTI, no bitmaps)."""
    return {k: decoded[k] for k in sorted((k for k in decoded if k.isdigit() and k != "1"), key=int)}


def response_mti(mti):
    """0100 -> 0110, 0200 -> 0210, 0400/0401 -> 0410, 0420/0421 -> 0430, 0800 -> 0810: the
    function digit goes up by one and a repeat's origin digit goes back to 0 (ISO 8583:1987)."""
    return mti[:2] + str(int(mti[2]) + 1) + "0"


def decode_icc(hex_or_bytes):
    """Field 55 as {tag: bytes}, constructed templates (71/72) as nested dicts (pyemv's decoder)."""
    data = bytes.fromhex(hex_or_bytes) if isinstance(hex_or_bytes, str) else bytes(hex_or_bytes)
    return pyemv_tlv.decode(data)


def icc_for_log(hex_value):
    """Field 55 decoded for the JSON log (hex strings), or None when it is not BER-TLV."""
    try:
        return pyemv_tlv.decode(bytes.fromhex(hex_value), convert=lambda t, v: h(v))
    except Exception:
        return None


# ------------------------------------------------------------------------------------ JSON log

class JsonLog:
    """Appends one JSON object per line; shared by threads, flushed per line so a test can tail it."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.file = open(path, "a", encoding="utf-8") if path else None

    def write(self, record):
        if not self.file:
            return
        line = json.dumps(record, separators=(",", ":"))
        with self.lock:
            self.file.write(line + "\n")
            self.file.flush()


# ------------------------------------------------------------------------------------ profiles' YAML

class YamlError(ValueError):
    """A card profile this peer cannot use (read with PyYAML, pinned in Tests/Oracle/requirements.txt)."""


# ------------------------------------------------------------------------------------ card profiles

class Application:
    """What the peers need of one profile application: keys, CVNs, AIPs."""

    def __init__(self, aid, cvn, imk, aip, kdi, app_version, priority, contactless, contactless_cvn, contactless_aip):
        self.aid, self.cvn, self.imk, self.aip, self.kdi = aid, cvn, imk, aip, kdi
        self.app_version, self.priority = app_version, priority
        self.contactless = contactless  # the application has a contactless: block
        self.contactless_cvn, self.contactless_aip = contactless_cvn, contactless_aip


class Profile:
    def __init__(self, path, data):
        self.path = path
        self.file = os.path.basename(path)
        self.name = data.get("name") or self.file
        pan = str(data.get("pan") or "")
        if not pan.isdigit() or not 12 <= len(pan) <= 19:
            raise YamlError(f"pan must be 12 to 19 digits, got {pan!r}")
        self.pan = pan
        self.psn = str(data.get("psn") or "00").zfill(2)
        expiry = str(data.get("expiry") or "")
        m = re.fullmatch(r"(\d{4})-(\d{2})", expiry)
        if not m:
            raise YamlError(f"expiry must be YYYY-MM, got {expiry!r}")
        self.expiry_yymm = m.group(1)[2:] + m.group(2)
        self.service_code = str(data.get("serviceCode") or "201")
        state = data.get("issuerState") or {}
        self.balance = None
        if state.get("balance") is not None:
            self.balance = int(decimal.Decimal(str(state["balance"])) * 100)
        self.lost = str(state.get("lost", "false")).lower() == "true"
        self.stolen = str(state.get("stolen", "false")).lower() == "true"
        self.blocked = str(state.get("blocked", "false")).lower() == "true"
        self.interfaces = data.get("interfaces") or ["contact", "magstripe"]
        oda_methods = {}
        for entry in data.get("oda") or []:
            oda_methods[str(entry.get("aid", "")).upper()] = entry.get("methods") or []
        self.applications = []
        for a in data.get("applications") or []:
            self.applications.append(self._application(a, oda_methods))

    @staticmethod
    def _application(a, oda_methods):
        aid = str(a.get("aid", "")).upper()
        cvn = int(a["cvn"])
        imk = bytes.fromhex(a["issuerMasterKey"])
        if cvn not in CVN_CLASSES or len(imk) != 16:
            raise YamlError(f"application {aid}: CVN {cvn} or issuerMasterKey not usable")
        visa = cvn in VISA_CVNS
        contactless = a.get("contactless")
        has_contactless = "contactless" in a
        if a.get("aip"):
            aip = bytes.fromhex(a["aip"])
        else:
            # The default AIP a cardbench profile gets (CardProfile.swift): cardholder verification
            # and terminal risk management; issuer authentication for Visa; the ODA methods; for a
            # Mastercard with a contactless block, EMV mode (byte 2 bit 8).
            b1 = 0x10 | 0x08 | (0x04 if visa else 0)
            for method in oda_methods.get(aid, []):
                b1 |= {"sda": 0x40, "dda": 0x20, "cda": 0x01}.get(method, 0)
            aip = bytes([b1, 0x80 if (not visa and has_contactless) else 0x00])
        cl_cvn = cl_aip = None
        if isinstance(contactless, dict):
            if contactless.get("cvn"):
                cl_cvn = int(contactless["cvn"])
            if contactless.get("aip"):
                cl_aip = bytes.fromhex(contactless["aip"])
        version = bytes.fromhex(a["applicationVersion"]) if a.get("applicationVersion") else (
            bytes.fromhex("008C") if visa else bytes.fromhex("0002"))
        return Application(aid=aid, cvn=cvn, imk=imk, aip=aip, kdi=int(a.get("keyDerivationIndex") or 1),
                           app_version=version, priority=int(a.get("priority") or 1), contactless=has_contactless,
                           contactless_cvn=cl_cvn, contactless_aip=cl_aip)

    def application(self, aid=None):
        """The application with `aid`, else the one of highest priority (lowest number)."""
        if aid:
            for a in self.applications:
                if a.aid == aid.upper():
                    return a
            raise YamlError(f"{self.file} has no application {aid}")
        if not self.applications:
            raise YamlError(f"{self.file} has no chip application")
        return min(self.applications, key=lambda a: a.priority)


def load_profile(path):
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict):
        raise YamlError(f"{path} is not a YAML mapping")
    return Profile(path, data)


def load_cards(directory, warn=None):
    """Every *.yaml profile in `directory` with a chip application, by PAN: {pan: [Profile, ...]}.
    A file this reader cannot use is skipped with a warning, not fatal: the host still serves."""
    cards = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith((".yaml", ".yml")):
            continue
        path = os.path.join(directory, name)
        try:
            p = load_profile(path)
        except (YamlError, KeyError, ValueError, OSError) as e:
            if warn:
                warn(f"{name}: skipped ({e})")
            continue
        cards.setdefault(p.pan, []).append(p)
    return cards


# ------------------------------------------------------------------------------------ cryptograms

CVN_CLASSES = {10: pyemv_cvn.VisaCVN10, 18: pyemv_cvn.VisaCVN18, 22: pyemv_cvn.VisaCVN22,
               16: pyemv_cvn.MasterCardCVN16, 17: pyemv_cvn.MasterCardCVN17,
               20: pyemv_cvn.MasterCardCVN20, 21: pyemv_cvn.MasterCardCVN21}
VISA_CVNS = {10, 18, 22}
# ARPC method per CVN (EMV Book 2 §8.2): method 2 (4-byte ARPC over ARQC||CSU) for Visa CVN 18/22,
# method 1 (8-byte ARPC = TDES(key, ARQC xor ARC||000000000000)) for the rest. The key is the ICC
# master key for Visa 10 and Mastercard 16/17, the AC session key for Visa 18/22 and MC 20/21:
# pyemv's generate_arpc of each class does the right one.
ARPC_METHOD = {10: 1, 16: 1, 17: 1, 20: 1, 21: 1, 18: 2, 22: 2}
# Terminal tags every CVN's cryptogram covers, in order, with their lengths.
AC_TAGS = [("9F02", 6), ("9F03", 6), ("9F1A", 2), ("95", 5), ("5F2A", 2), ("9A", 3), ("9C", 1),
           ("9F37", 4), ("82", 2), ("9F36", 2)]


def card_keys(cvn, imk, pan, psn):
    """pyemv's object for the CVN, keyed as cardbench's oracle keys it: the profile's one issuer
    master key stands for IMK-AC, IMK-SMI and IMK-SMC alike."""
    return CVN_CLASSES[cvn](iss_mk_ac=imk, iss_mk_smi=imk, iss_mk_smc=imk, pan=pan, psn=psn)


class CryptogramInputError(ValueError):
    pass


def ac_arguments(cvn, tags):
    """generate_ac's keyword arguments from the ICC data {tag: bytes}: the ten tags, then what the
    CVN takes from 9F10 (Visa 10: CVR = IAD bytes 4-7; Visa 18/22: the whole IAD; Mastercard:
    CVR = IAD bytes 3-8, and for 17/21 the counters, IAD bytes 11-18)."""
    kw = {}
    for tag, length in AC_TAGS:
        v = tags.get(tag)
        if v is None:
            raise CryptogramInputError(f"tag {tag} missing from field 55")
        if len(v) != length:
            raise CryptogramInputError(f"tag {tag} is {len(v)} bytes, the cryptogram takes {length}")
        kw["tag_" + tag.lower()] = v
    iad = tags.get("9F10")
    if iad is None:
        raise CryptogramInputError("tag 9F10 (issuer application data) missing from field 55")
    if cvn == 10:
        if len(iad) < 7:
            raise CryptogramInputError(f"Visa IAD {h(iad)} is shorter than 7 bytes")
        kw["cvr"] = iad[3:7]
    elif cvn in (18, 22):
        kw["tag_9f10"] = iad
    else:
        if len(iad) < (18 if cvn in (17, 21) else 8):
            raise CryptogramInputError(f"Mastercard IAD {h(iad)} is too short for CVN {cvn}")
        kw["cvr"] = iad[2:8]
        if cvn in (17, 21):
            kw["counters"] = iad[10:18]
    return kw


def iad_cvn(iad):
    """The CVN an IAD names, as cardbench's cards lay it out (None when it names none known):
    Visa format 0/1 '06 DKI CVN CVR', Visa format 2 '1F 22 ...', Mastercard 'DKI CVN CVR ...'."""
    if len(iad) >= 2 and iad[0] == 0x1F and iad[1] == 0x22:
        return 22
    if len(iad) >= 3 and iad[0] == 0x06 and iad[2] in (10, 18):
        return iad[2]
    if len(iad) >= 2 and iad[1] in (16, 17, 20, 21):
        return iad[1]
    return None


def generate_arqc(keys, cvn, tags):
    return keys.generate_ac(**ac_arguments(cvn, tags))


def arqc_matches(keys, cvn, tags, arqc):
    return hmac.compare_digest(generate_arqc(keys, cvn, tags), bytes(arqc))


def csu_for(response_code):
    """Method 2's card status update, as cardbench's host writes it: byte 2 bit 8 says the issuer
    approved (Visa's 'issuer approves online transaction'); nothing else is asked of the card."""
    return bytes([0x00, 0x80 if response_code in APPROVAL_CODES else 0x00, 0x00, 0x00])


def issuer_authentication_data(keys, cvn, arqc, atc, response_code):
    """Tag 91: ARPC||ARC (method 1, ARC = the response code in ASCII) or ARPC||CSU (method 2)."""
    if ARPC_METHOD[cvn] == 2:
        csu = csu_for(response_code)
        return keys.generate_arpc(tag_9f26=arqc, tag_9f36=atc, csu=csu) + csu
    arc = response_code.encode("ascii")
    if cvn in (20, 21):
        return keys.generate_arpc(tag_9f26=arqc, tag_9f36=atc, arpc_rc=arc) + arc
    return keys.generate_arpc(tag_9f26=arqc, arpc_rc=arc) + arc


def check_issuer_authentication_data(keys, cvn, arqc, atc, data):
    """Recomputes the ARPC of tag 91 over `arqc` with the ARC or CSU the 91 itself carries.
    Returns (ok, arpc, arc_or_csu, reason)."""
    data = bytes(data)
    if ARPC_METHOD[cvn] == 2:
        if not 8 <= len(data) <= 16:
            return False, None, None, f"tag 91 of {len(data)} bytes; method 2 takes ARPC(4)||CSU(4)[||data]"
        arpc, csu, prop = data[:4], data[4:8], data[8:]
        expected = keys.generate_arpc(tag_9f26=arqc, tag_9f36=atc, csu=csu, proprietary_auth_data=prop or None)
        ok = hmac.compare_digest(expected, arpc)
        return ok, arpc, csu, "" if ok else f"ARPC {h(arpc)}, pyemv {h(expected)} (method 2, CSU {h(csu)})"
    if len(data) != 10:
        return False, None, None, f"tag 91 of {len(data)} bytes; method 1 takes ARPC(8)||ARC(2)"
    arpc, arc = data[:8], data[8:]
    if cvn in (20, 21):
        expected = keys.generate_arpc(tag_9f26=arqc, tag_9f36=atc, arpc_rc=arc)
    else:
        expected = keys.generate_arpc(tag_9f26=arqc, arpc_rc=arc)
    ok = hmac.compare_digest(expected, arpc)
    return ok, arpc, arc, "" if ok else f"ARPC {h(arpc)}, pyemv {h(expected)} (method 1, ARC {h(arc)})"


def build_iad(cvn, kdi=1, counters=None):
    """Issuer application data in the CVN's layout, for an ARQC at the first GENERATE AC with the
    second not yet asked (how cardbench's VirtualCard lays it out, Sources/VirtualCard):
    Visa 10/18: 06 DKI CVN + CVR 03 A0 00 00 (length 03, byte 2 = first AC ARQC '10', second
    'not requested' '10'); Visa 22: format 2, 1F 22 DKI 00 + that CVR, zero-padded to 32 bytes;
    Mastercard: DKI CVN + CVR A0 00 03 20 00 00 (ARQC / not requested, PIN try counter 3,
    offline PIN not performed) + DAC 0000 + counters (8 bytes)."""
    visa_cvr = bytes.fromhex("03A00000")
    if cvn in (10, 18):
        return bytes([0x06, kdi, cvn]) + visa_cvr
    if cvn == 22:
        return (bytes([0x1F, 0x22, kdi, 0x00]) + visa_cvr).ljust(32, b"\x00")
    return bytes([kdi, cvn]) + bytes.fromhex("A00003200000") + bytes(2) + (counters or bytes(8))


# ------------------------------------------------------------------------------------ issuer script

# APPLICATION UNBLOCK (84 18 00 00, Lc 08: the MAC alone) is the default script command: on a card
# that runs it, it changes nothing for an unblocked application, so a test card is not left blocked
# for the next test. APPLICATION BLOCK (84 1E) is there for tests that want to see the effect.
SCRIPT_COMMANDS = {"unblock": bytes.fromhex("8418000008"), "block": bytes.fromhex("841E000008")}


def issuer_script_72(script_id, command_header, keys=None, arqc=None, atc=None):
    """A 72 template (scripts after the second GENERATE AC): 9F18 script identifier, one 86
    command = header || 8-byte MAC. The MAC is pyemv's generate_command_mac for the CVN (secure
    messaging format 2, keyed with the profile's IMK standing in for IMK-SMI); zeros when the
    card is unknown. No cardbench card verifies it today."""
    mac = keys.generate_command_mac(command_header=command_header, tag_9f26=arqc, tag_9f36=atc) if keys else bytes(8)
    return {"72": {"9F18": script_id, "86": command_header + mac}}
