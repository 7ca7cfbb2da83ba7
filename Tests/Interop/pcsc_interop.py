#!/usr/bin/env python3
"""PC/SC interoperability check: an EMV contact transaction against a virtual card, through pcscd.

Runs as a terminal would, through the real PC/SC stack (pcscd + vsmartcard's vpcd + pyscard):
waits for the reader and the card, SELECTs the PSE (1PAY.SYS.DDF01) and reads its directory,
SELECTs the application, runs GET PROCESSING OPTIONS, reads the records the AFL names (the PAN in
5A must be --profile-pan), VERIFYs the plaintext PIN (P2 80), then asks GENERATE AC for an ARQC
over CDOL1 and recomputes that ARQC with pyemv's class for the CVN, from the issuer master key.

Prints every C-APDU and R-APDU. Exit status: 0 pass; 1 the card answered wrongly (a mismatch, a
status word); 2 the environment is not ready (no pcscd, no reader, no card, missing module).

Run by Tests/Interop/run.sh; see Tests/Interop/README.md.
"""
import argparse
import datetime
import os
import sys
import time
import warnings

try:
    from smartcard import scard
    from smartcard.CardConnection import CardConnection
    from smartcard.Exceptions import CardConnectionException, SmartcardException
    from smartcard.System import readers as list_readers
except ImportError as e:  # pragma: no cover - environment
    sys.exit(f"ENVIRONMENT: pyscard is not importable by {sys.executable} ({e}).\n"
             "  Either create the venv with Debian's python3 and --system-site-packages (then\n"
             "  apt's python3-pyscard is visible), or `pip install pyscard` into it (builds from\n"
             "  source: needs libpcsclite-dev swig gcc and the Python headers).")

warnings.simplefilter("ignore")  # cryptography warns that 2-key TDES is old; EMV still uses it
try:
    from pyemv import cvn as pyemv_cvn
except ImportError as e:  # pragma: no cover - environment
    sys.exit(f"ENVIRONMENT: pyemv is not importable by {sys.executable} ({e}); run `make venv`.")

PSE = b"1PAY.SYS.DDF01"
CVN_CLASSES = {10: pyemv_cvn.VisaCVN10, 18: pyemv_cvn.VisaCVN18, 22: pyemv_cvn.VisaCVN22,
               16: pyemv_cvn.MasterCardCVN16, 17: pyemv_cvn.MasterCardCVN17,
               20: pyemv_cvn.MasterCardCVN20, 21: pyemv_cvn.MasterCardCVN21}
# Tags every CVN's cryptogram covers (EMV Book 2 §8.1.1 recommended minimum), with their lengths.
AC_TAGS = [(0x9F02, 6), (0x9F03, 6), (0x9F1A, 2), (0x95, 5), (0x5F2A, 2), (0x9A, 3), (0x9C, 1),
           (0x9F37, 4), (0x82, 2), (0x9F36, 2)]
# Numeric (n) terminal tags: padded and truncated on the left (EMV Book 3 §5.4).
NUMERIC_TAGS = {0x9F02, 0x9F03, 0x9F1A, 0x5F2A, 0x9A, 0x9C, 0x9F21, 0x9F41, 0x9F15, 0x9F35, 0x9F01,
                0x5F36, 0x9F3C, 0x9F3D, 0x9F11, 0x9F42, 0x9F44}
COMPRESSED_NUMERIC_TAGS = {0x5A, 0x9F20}  # cn: padded with trailing F


class Fail(Exception):
    """The card (or the stack in front of it) did something a terminal does not accept."""


class EnvironmentNotReady(Exception):
    """pcscd, the reader or the card is not there."""


def h(b):
    return bytes(b).hex().upper()


def tag_name(t):
    return "%X" % t


# ---------------------------------------------------------------------------------------- TLV / DOL

def parse_tlv(data, where="data"):
    """BER-TLV as EMV uses it: a list of (tag, value, children or None). 00/FF padding is skipped."""
    out, i, data = [], 0, bytes(data)
    while i < len(data):
        if data[i] in (0x00, 0xFF):
            i += 1
            continue
        start = i
        tag = data[i]
        i += 1
        if tag & 0x1F == 0x1F:
            while True:
                if i >= len(data):
                    raise Fail(f"{where}: truncated tag at offset {start}: {h(data)}")
                tag = tag << 8 | data[i]
                i += 1
                if not data[i - 1] & 0x80:
                    break
        if i >= len(data):
            raise Fail(f"{where}: tag {tag_name(tag)} has no length: {h(data)}")
        length = data[i]
        i += 1
        if length & 0x80:
            n = length & 0x7F
            if n == 0 or n > 3 or i + n > len(data):
                raise Fail(f"{where}: bad length field for tag {tag_name(tag)}: {h(data)}")
            length = int.from_bytes(data[i:i + n], "big")
            i += n
        if i + length > len(data):
            raise Fail(f"{where}: tag {tag_name(tag)} says {length} bytes, {len(data) - i} remain: {h(data)}")
        value = data[i:i + length]
        i += length
        first = tag
        while first > 0xFF:
            first >>= 8
        children = parse_tlv(value, f"{where}/{tag_name(tag)}") if first & 0x20 else None
        out.append((tag, value, children))
    return out


def find(tlvs, tag):
    """First value of `tag` anywhere in the tree, or None."""
    for t, v, children in tlvs:
        if t == tag:
            return v
        if children:
            found = find(children, tag)
            if found is not None:
                return found
    return None


def primitives(tlvs, into):
    for t, v, children in tlvs:
        if children is not None:
            primitives(children, into)
        elif t not in into:
            into[t] = v
    return into


def parse_dol(dol):
    """A DOL: a list of (tag, length)."""
    out, i, dol = [], 0, bytes(dol)
    while i < len(dol):
        tag = dol[i]
        i += 1
        if tag & 0x1F == 0x1F:
            while True:
                if i >= len(dol):
                    raise Fail(f"truncated DOL: {h(dol)}")
                tag = tag << 8 | dol[i]
                i += 1
                if not dol[i - 1] & 0x80:
                    break
        if i >= len(dol):
            raise Fail(f"DOL entry {tag_name(tag)} has no length: {h(dol)}")
        out.append((tag, dol[i]))
        i += 1
    return out


def fit(tag, value, length):
    """A value made to the length a DOL asks (EMV Book 3 §5.4)."""
    if len(value) == length:
        return value
    if tag in NUMERIC_TAGS:
        return value[-length:] if len(value) > length else bytes(length - len(value)) + value
    if tag in COMPRESSED_NUMERIC_TAGS:
        return value[:length] if len(value) > length else value + b"\xFF" * (length - len(value))
    return value[:length] if len(value) > length else value + bytes(length - len(value))


def bcd(n, digits):
    return bytes.fromhex(str(n).rjust(digits, "0"))


def terminal_data(args):
    now = datetime.datetime.now()
    un = bytes.fromhex(args.un) if args.un else os.urandom(4)
    return {
        0x9F02: bcd(args.amount, 12),                  # Amount, authorised
        0x9F03: bytes(6),                              # Amount, other
        0x9F1A: bcd(args.country, 4),                  # Terminal country code
        0x95: bytes.fromhex("0000008000"),             # TVR: transaction exceeds floor limit
        0x5F2A: bcd(args.currency, 4),                 # Transaction currency code
        0x5F36: b"\x02",                               # Transaction currency exponent
        0x9A: bytes.fromhex(now.strftime("%y%m%d")),   # Transaction date
        0x9F21: bytes.fromhex(now.strftime("%H%M%S")), # Transaction time
        0x9C: b"\x00",                                 # Transaction type: goods and services
        0x9F37: un,                                    # Unpredictable number
        0x9F35: b"\x22",                               # Terminal type: attended, offline with online
        0x9F33: bytes.fromhex("E0F8C8"),               # Terminal capabilities
        0x9F40: bytes.fromhex("6000F0A001"),           # Additional terminal capabilities
        0x9F34: bytes.fromhex("010002"),               # CVM results: plaintext PIN by ICC, successful
        0x9F45: bytes(2),                              # Data authentication code
        0x9F4C: bytes(8),                              # ICC dynamic number
        0x9F1E: b"CBENCH01",                           # IFD serial number
        0x9F1C: b"TERM0001",                           # Terminal identification
        0x9F16: b"CARDBENCH-TEST ",                    # Merchant identifier
        0x9F15: bytes.fromhex("5411"),                 # Merchant category code
        0x9F4E: b"cardbench interop",                  # Merchant name and location
        0x9F01: bytes.fromhex("000000123456"),         # Acquirer identifier
        0x9F39: b"\x05",                               # POS entry mode: ICC
        0x9F41: bytes.fromhex("00000001"),             # Transaction sequence counter
        0x9F53: b"\x52",                               # Transaction category code
        0x9F09: bytes.fromhex("0002"),                 # Application version number (terminal)
        0x5F57: b"\x00",                               # Account type: default
        0x9F66: bytes(4),                              # TTQ (contactless; zero for contact)
    }


def build_dol_data(dol, values, label, sent):
    """Concatenates the values a DOL asks for; records what was sent (tag -> bytes) in `sent`."""
    out = b""
    for tag, length in dol:
        if tag in values:
            v = fit(tag, values[tag], length)
            note = "" if len(values[tag]) == length else f" (fitted from {len(values[tag])} bytes)"
        else:
            v = bytes(length)
            note = " (unknown to this terminal: zeros)"
        print(f"     {label} {tag_name(tag):>4} [{length:2}] = {h(v)}{note}")
        sent[tag] = v
        out += v
    return out


# ---------------------------------------------------------------------------------------- PC/SC

def wait_for_card(reader_name, timeout):
    """Waits until pcscd answers, lists `reader_name` and sees a card in it. Returns the name."""
    deadline = time.monotonic() + timeout
    last = "pcscd not reachable"
    while time.monotonic() < deadline:
        hr, ctx = scard.SCardEstablishContext(scard.SCARD_SCOPE_USER)
        if hr != scard.SCARD_S_SUCCESS:
            last = f"pcscd not reachable ({scard.SCardGetErrorMessage(hr)})"
            time.sleep(0.2)
            continue
        try:
            hr, names = scard.SCardListReaders(ctx, [])
            names = list(names) if hr == scard.SCARD_S_SUCCESS else []
            match = [n for n in names if n == reader_name] or [n for n in names if n.startswith(reader_name)]
            if not match:
                last = f"reader {reader_name!r} not listed (readers: {names or 'none'})"
            else:
                hr, states = scard.SCardGetStatusChange(ctx, 0, [(match[0], scard.SCARD_STATE_UNAWARE)])
                if hr == scard.SCARD_S_SUCCESS and states[0][1] & scard.SCARD_STATE_PRESENT:
                    return match[0]
                last = f"reader {match[0]!r} listed, no card in it yet"
        finally:
            scard.SCardReleaseContext(ctx)
        time.sleep(0.1)
    raise EnvironmentNotReady(f"after {timeout:.0f} s: {last}")


class Terminal:
    PROTOCOLS = {"any": None, "t0": CardConnection.T0_protocol, "t1": CardConnection.T1_protocol}

    def __init__(self, reader_name, protocol):
        reader = next(r for r in list_readers() if str(r) == reader_name)
        self.connection = reader.createConnection()
        if self.PROTOCOLS[protocol] is None:
            self.connection.connect()  # SCARD_PROTOCOL_T0 | T1: pcscd takes the first the ATR offers
        else:
            self.connection.connect(self.PROTOCOLS[protocol])
        self.atr = bytes(self.connection.getATR())
        self.protocol = {CardConnection.T0_protocol: "T=0", CardConnection.T1_protocol: "T=1"}.get(
            self.connection.getProtocol(), str(self.connection.getProtocol()))
        self.apdus = 0

    def close(self):
        try:
            self.connection.disconnect()
        except Exception:
            pass

    def raw(self, apdu):
        print(f"  >> {h(apdu)}")
        try:
            data, sw1, sw2 = self.connection.transmit(list(apdu))
        except CardConnectionException as e:
            raise Fail(f"transmit {h(apdu)}: {e} (did the card disconnect or answer an empty frame?)")
        self.apdus += 1
        data = bytes(data)
        print(f"  << {h(data)} {sw1:02X}{sw2:02X}" if data else f"  << {sw1:02X}{sw2:02X}")
        return data, sw1 << 8 | sw2

    def send(self, cla, ins, p1, p2, data=None, le=True):
        """One command, with T=0 status handling a terminal does: 61xx -> GET RESPONSE, 6Cxx -> resend
        with Le=xx. (vpcd passes APDUs through unchanged; neither pcscd nor pyscard does this.)"""
        apdu = bytes([cla, ins, p1, p2])
        if data is not None:
            apdu += bytes([len(data)]) + bytes(data)
        if le:
            apdu += b"\x00"
        out, sw = self.raw(apdu)
        if sw >> 8 == 0x6C:
            print(f"     (6Cxx: resending with Le={sw & 0xFF:02X})")
            out, sw = self.raw(apdu[:-1] + bytes([sw & 0xFF]) if le else apdu + bytes([sw & 0xFF]))
        while sw >> 8 == 0x61:
            print(f"     (61xx: GET RESPONSE for {sw & 0xFF or 256} bytes)")
            more, sw = self.raw(bytes([0x00, 0xC0, 0x00, 0x00, sw & 0xFF]))
            out += more
        return out, sw


def atr_protocols(atr):
    """Protocols an ATR offers: the T of each TDi (T=15 is global bytes, not a protocol); T=0 if none."""
    offered, y, i = set(), atr[1] if len(atr) > 1 else 0, 2
    while True:
        i += bin(y & 0x70).count("1")  # TAi, TBi, TCi present
        if not y & 0x80 or i >= len(atr):
            break
        y = atr[i]
        i += 1
        if y & 0x0F != 15:
            offered.add(y & 0x0F)
    return offered or {0}


# ---------------------------------------------------------------------------------------- the flow

def expect_ok(sw, what):
    if sw != 0x9000:
        meaning = {0x6283: "selected file invalidated (application blocked)", 0x6700: "wrong length",
                   0x6982: "security status not satisfied", 0x6983: "authentication method blocked",
                   0x6985: "conditions of use not satisfied", 0x6A80: "incorrect data", 0x6A81: "function not supported",
                   0x6A82: "file or application not found", 0x6A83: "record not found",
                   0x6A86: "incorrect P1/P2", 0x6A88: "referenced data not found",
                   0x6D00: "instruction not supported", 0x6E00: "class not supported"}.get(sw, "")
        raise Fail(f"{what}: status {sw:04X}{' (' + meaning + ')' if meaning else ''}, expected 9000")


def step(n, title):
    print(f"\n[{n}] {title}")


def run(args):
    t0 = time.monotonic()
    step(0, f"wait for reader {args.reader!r} and a card (up to {args.timeout:.0f} s)")
    deadline = t0 + args.timeout
    while True:
        name = wait_for_card(args.reader, max(deadline - time.monotonic(), 0.5))
        print(f"     card present in {name!r} after {time.monotonic() - t0:.2f} s")
        try:
            term = Terminal(name, args.protocol)
            break
        except SmartcardException as e:
            # pcscd polls vpcd every 0.4 s: a card that just left can still look present, and
            # connecting then finds it unpowered or gone. Wait for the next card state.
            if "mismatch" in str(e) or time.monotonic() > deadline:
                raise Fail(f"connect to {name!r} with protocol {args.protocol}: {e}")
            print(f"     connect failed ({e}); retrying")
            time.sleep(0.5)
    try:
        return transaction(term, args)
    finally:
        term.close()


def transaction(term, args):
    t_start = time.monotonic()
    offered = atr_protocols(term.atr)
    print(f"     ATR {h(term.atr)} (offers {', '.join('T=%d' % p for p in sorted(offered))}); "
          f"pcscd chose {term.protocol}")
    if args.atr and term.atr != bytes.fromhex(args.atr):
        raise Fail(f"ATR is {h(term.atr)}, the profile says {args.atr.upper()}")

    # 1. PSE and its directory
    step(1, "SELECT the PSE 1PAY.SYS.DDF01")
    fci, sw = term.send(0x00, 0xA4, 0x04, 0x00, PSE)
    expect_ok(sw, "SELECT 1PAY.SYS.DDF01")
    fci_tlv = parse_tlv(fci, "PSE FCI")
    if not fci_tlv or fci_tlv[0][0] != 0x6F:
        raise Fail(f"PSE FCI is not a 6F template: {h(fci)}")
    if find(fci_tlv, 0x84) != PSE:
        raise Fail(f"PSE FCI names DF {h(find(fci_tlv, 0x84) or b'')}, expected {h(PSE)}")
    sfi_value = find(fci_tlv, 0x88)
    if not sfi_value or len(sfi_value) != 1 or not 1 <= sfi_value[0] <= 30:
        raise Fail(f"PSE FCI has no valid SFI of the directory (88): {h(fci)}")
    sfi = sfi_value[0]
    print(f"     directory in SFI {sfi}")

    step(2, f"READ RECORD the directory (SFI {sfi}) until 6A83")
    directory = []
    for record in range(1, 17):
        data, sw = term.send(0x00, 0xB2, record, sfi << 3 | 4)
        if sw == 0x6A83:
            break
        expect_ok(sw, f"READ RECORD {record} of the PSE directory")
        tlv = parse_tlv(data, f"PSE record {record}")
        if not tlv or tlv[0][0] != 0x70:
            raise Fail(f"PSE record {record} is not a 70 template: {h(data)}")
        for t, v, children in tlv[0][2]:
            if t != 0x61:
                continue
            aid, label, prio = find(children, 0x4F), find(children, 0x50), find(children, 0x87)
            if not aid:
                raise Fail(f"directory entry without an AID (4F) in record {record}: {h(v)}")
            directory.append((aid, (label or b"").decode("ascii", "replace"), prio[0] if prio else None))
            print(f"     entry: AID {h(aid)} label {directory[-1][1]!r} priority "
                  f"{'%02X' % prio[0] if prio else 'none'}")
    else:
        raise Fail("the PSE directory never answered 6A83 (record not found) after 16 records")
    if not directory:
        raise Fail("the PSE directory holds no application")

    # 2. choose and select the application
    if args.aid:
        wanted = bytes.fromhex(args.aid)
        chosen = next((e for e in directory if e[0] == wanted), None)
        if not chosen:
            raise Fail(f"--aid {args.aid} is not in the PSE directory")
    else:
        chosen = min(directory, key=lambda e: (e[2] & 0x0F or 16) if e[2] is not None else 16)
    aid = chosen[0]
    step(3, f"SELECT the application {h(aid)} ({chosen[1]})")
    fci, sw = term.send(0x00, 0xA4, 0x04, 0x00, aid)
    expect_ok(sw, f"SELECT {h(aid)}")
    fci_tlv = parse_tlv(fci, "application FCI")
    if not fci_tlv or fci_tlv[0][0] != 0x6F:
        raise Fail(f"application FCI is not a 6F template: {h(fci)}")
    df = find(fci_tlv, 0x84)
    if df != aid:
        raise Fail(f"FCI names DF {h(df or b'')}, expected the selected AID {h(aid)}")
    pdol = parse_dol(find(fci_tlv, 0x9F38) or b"")
    print(f"     PDOL: {' '.join('%s[%d]' % (tag_name(t), n) for t, n in pdol) or 'none'}")

    # 3. GPO
    values = terminal_data(args)
    sent = {}
    step(4, "GET PROCESSING OPTIONS")
    pdol_data = build_dol_data(pdol, values, "PDOL", sent)
    gpo_data = bytes([0x83, len(pdol_data)]) + pdol_data
    resp, sw = term.send(0x80, 0xA8, 0x00, 0x00, gpo_data)
    expect_ok(sw, "GET PROCESSING OPTIONS")
    tlv = parse_tlv(resp, "GPO response")
    if len(tlv) != 1 or tlv[0][0] not in (0x80, 0x77):
        raise Fail(f"GPO response is neither format 1 (80) nor format 2 (77): {h(resp)}")
    if tlv[0][0] == 0x80:
        if len(tlv[0][1]) < 2:
            raise Fail(f"GPO format 1 response too short: {h(resp)}")
        aip, afl = tlv[0][1][:2], tlv[0][1][2:]
        fmt = 1
    else:
        aip, afl = find(tlv, 0x82), find(tlv, 0x94)
        if aip is None or afl is None or len(aip) != 2:
            raise Fail(f"GPO format 2 response lacks 82 (2 bytes) or 94: {h(resp)}")
        fmt = 2
    if not afl or len(afl) % 4:
        raise Fail(f"AFL is empty or not a multiple of 4 bytes: {h(afl)}")
    print(f"     format {fmt}: AIP {h(aip)}, AFL {h(afl)}")

    # 4. records per AFL
    step(5, "READ RECORD per AFL")
    card = {}
    for i in range(0, len(afl), 4):
        sfi, first, last, oda = afl[i] >> 3, afl[i + 1], afl[i + 2], afl[i + 3]
        if not (1 <= sfi <= 30 and 1 <= first <= last and oda <= last - first + 1):
            raise Fail(f"malformed AFL entry {h(afl[i:i + 4])}")
        for record in range(first, last + 1):
            data, sw = term.send(0x00, 0xB2, record, sfi << 3 | 4)
            expect_ok(sw, f"READ RECORD SFI {sfi} record {record} (named by the AFL)")
            tlv = parse_tlv(data, f"SFI {sfi} record {record}")
            if len(tlv) != 1 or tlv[0][0] != 0x70:
                raise Fail(f"SFI {sfi} record {record} is not one 70 template: {h(data)}")
            primitives(tlv, card)
    print("     " + " ".join(f"{tag_name(t)}={h(v)}" for t, v in card.items()))

    pan_field = card.get(0x5A)
    if pan_field is None:
        raise Fail("no PAN (5A) in the records the AFL names")
    pan = h(pan_field).rstrip("F")
    if pan != args.profile_pan:
        raise Fail(f"PAN (5A) is {pan}, the profile says {args.profile_pan}")
    print(f"     PAN {pan} matches the profile")
    if 0x57 in card:
        t2_pan = h(card[0x57]).split("D")[0]
        if t2_pan != args.profile_pan:
            raise Fail(f"track 2 equivalent (57) carries PAN {t2_pan}, the profile says {args.profile_pan}")
    if 0x5F34 in card and h(card[0x5F34]) != args.psn:
        raise Fail(f"PAN sequence number (5F34) is {h(card[0x5F34])}, --psn says {args.psn}")
    cdol1_raw = card.get(0x8C)
    if cdol1_raw is None:
        raise Fail("no CDOL1 (8C) in the records the AFL names")
    cdol1 = parse_dol(cdol1_raw)
    print(f"     CDOL1: {' '.join('%s[%d]' % (tag_name(t), n) for t, n in cdol1)}")
    if 0x9F08 in card:
        values[0x9F09] = card[0x9F08]

    # 5. PIN
    step(6, "GET DATA PIN try counter (9F17), then VERIFY the plaintext PIN (P2 80)")
    data, sw = term.send(0x80, 0xCA, 0x9F, 0x17)
    if sw == 0x9000:
        print(f"     PIN tries left: {h(find(parse_tlv(data, 'GET DATA 9F17'), 0x9F17) or b'?')}")
    else:
        print(f"     (GET DATA 9F17 answered {sw:04X}; not required)")
    pin = args.pin
    if not (pin.isdigit() and 4 <= len(pin) <= 12):
        raise Fail(f"--pin must be 4 to 12 digits, got {pin!r}")
    block = bytes.fromhex(("2%X" % len(pin) + pin).ljust(16, "F"))
    _, sw = term.send(0x00, 0x20, 0x00, 0x80, block, le=False)
    if sw >> 4 == 0x63C:
        raise Fail(f"VERIFY refused the profile's PIN: 63C{sw & 0xF:X} ({sw & 0xF} tries left)")
    expect_ok(sw, "VERIFY plaintext PIN")
    print("     PIN verified")

    # 6. GENERATE AC
    step(7, "GET DATA ATC (9F36), then GENERATE AC asking an ARQC (P1 80) over CDOL1")
    data, sw = term.send(0x80, 0xCA, 0x9F, 0x36)
    atc_before = None
    if sw == 0x9000:
        atc_before = find(parse_tlv(data, "GET DATA 9F36"), 0x9F36)
        print(f"     ATC before: {h(atc_before)}")
    else:
        print(f"     (GET DATA 9F36 answered {sw:04X}; not required)")
    cdol1_data = build_dol_data(cdol1, values, "CDOL1", sent)
    resp, sw = term.send(0x80, 0xAE, 0x80, 0x00, cdol1_data)
    expect_ok(sw, "GENERATE AC")
    tlv = parse_tlv(resp, "GENERATE AC response")
    if len(tlv) != 1 or tlv[0][0] not in (0x80, 0x77):
        raise Fail(f"GENERATE AC response is neither format 1 (80) nor format 2 (77): {h(resp)}")
    if tlv[0][0] == 0x80:
        v = tlv[0][1]
        if len(v) < 11:
            raise Fail(f"GENERATE AC format 1 response too short: {h(resp)}")
        cid, atc, ac, iad = v[0:1], v[1:3], v[3:11], v[11:]
        fmt = 1
    else:
        cid, atc, ac, iad = (find(tlv, t) for t in (0x9F27, 0x9F36, 0x9F26, 0x9F10))
        missing = [n for n, x in (("9F27", cid), ("9F36", atc), ("9F26", ac), ("9F10", iad)) if x is None]
        if missing:
            raise Fail(f"GENERATE AC format 2 response lacks {', '.join(missing)}: {h(resp)}")
        fmt = 2
    if len(cid) != 1 or len(atc) != 2 or len(ac) != 8:
        raise Fail(f"GENERATE AC: CID {h(cid)}, ATC {h(atc)}, AC {h(ac)} have the wrong lengths")
    kind = {0x00: "AAC", 0x40: "TC", 0x80: "ARQC"}.get(cid[0] & 0xC0, "RFU")
    print(f"     format {fmt}: CID {h(cid)} ({kind}), ATC {h(atc)}, AC {h(ac)}, IAD {h(iad)}")
    if kind != "ARQC":
        raise Fail(f"GENERATE AC returned a {kind} (CID {h(cid)}) to a request for an ARQC")
    if atc_before is not None and int.from_bytes(atc, "big") != int.from_bytes(atc_before, "big") + 1:
        raise Fail(f"ATC went from {h(atc_before)} to {h(atc)}; one GENERATE AC should add 1")

    # 7. pyemv
    step(8, f"verify the ARQC with pyemv {CVN_CLASSES[args.cvn].__name__}")
    tags = dict(sent)
    tags[0x82] = aip
    tags[0x9F36] = atc
    for tag, length in AC_TAGS:
        if tag not in tags:
            raise Fail(f"tag {tag_name(tag)} is neither in the PDOL nor in CDOL1: a CVN {args.cvn} "
                       "cryptogram covers it, so the card cannot have computed one")
        if len(tags[tag]) != length:
            raise Fail(f"tag {tag_name(tag)} was sent with {len(tags[tag])} bytes, a cryptogram takes {length}")
    kw = {f"tag_{t:x}": tags[t] for t, _ in AC_TAGS}
    if args.cvn == 22:
        # IAD format 2: length byte 1F, then the CVN as hex '22', 32 bytes in all.
        if len(iad) != 32 or iad[0] != 0x1F or iad[1] != 0x22:
            raise Fail(f"Visa CVN '22' IAD {h(iad)} should be format 2: 32 bytes, 1F 22 …")
        kw["tag_9f10"] = iad
    elif args.cvn in (10, 18):
        if len(iad) < 7 or iad[2] != args.cvn:
            raise Fail(f"Visa IAD {h(iad)} should be at least 7 bytes with the CVN ({args.cvn:02X}) in byte 3")
        if args.cvn == 10:
            kw["cvr"] = iad[3:7]
        else:
            kw["tag_9f10"] = iad
    else:
        if len(iad) < 18 or iad[1] != args.cvn:
            raise Fail(f"Mastercard IAD {h(iad)} should be at least 18 bytes with the CVN ({args.cvn:02X}) in byte 2")
        kw["cvr"] = iad[2:8]
        if args.cvn in (17, 21):
            kw["counters"] = iad[10:18]
    print("     inputs: " + " ".join(f"{k[4:].upper() if k.startswith('tag_') else k}={h(v)}" for k, v in kw.items()))
    imk = bytes.fromhex(args.imk)
    oracle = CVN_CLASSES[args.cvn](iss_mk_ac=imk, iss_mk_smi=imk, iss_mk_smc=imk, pan=args.profile_pan, psn=args.psn)
    expected = oracle.generate_ac(**kw)
    if expected != ac:
        raise Fail(f"ARQC mismatch: card {h(ac)}, pyemv {h(expected)} (CVN {args.cvn}, PAN {args.profile_pan}, "
                   f"PSN {args.psn})")
    print(f"     ARQC {h(ac)} == pyemv {h(expected)}")
    print(f"\nPASS: {term.apdus} APDUs over {term.protocol} in {time.monotonic() - t_start:.2f} s")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile-pan", required=True, help="the profile's PAN (digits)")
    p.add_argument("--pin", required=True, help="the profile's PIN (digits)")
    p.add_argument("--imk", required=True, help="the profile's issuer master key for ACs, 32 hex digits")
    p.add_argument("--cvn", required=True, type=int, choices=sorted(CVN_CLASSES), help="the application's CVN")
    p.add_argument("--psn", default="00", help="PAN sequence number, 2 digits (default 00)")
    p.add_argument("--aid", help="application to select (hex); default: the PSE entry of highest priority")
    p.add_argument("--atr", help="expected ATR (hex); default: not checked")
    p.add_argument("--reader", default="Virtual PCD 00 00",
                   help="PC/SC reader name or its prefix (default 'Virtual PCD 00 00', vpcd's port 35963)")
    p.add_argument("--protocol", choices=("any", "t0", "t1"), default="any",
                   help="protocol to connect with (default any: pcscd picks the first the ATR offers)")
    p.add_argument("--timeout", type=float, default=30, help="seconds to wait for the reader and card (default 30)")
    p.add_argument("--amount", type=int, default=1000, help="amount authorised in minor units (default 1000)")
    p.add_argument("--currency", type=int, default=484, help="ISO 4217 numeric currency (default 484)")
    p.add_argument("--country", type=int, default=484, help="ISO 3166 numeric terminal country (default 484)")
    p.add_argument("--un", help="unpredictable number, 8 hex digits (default random)")
    args = p.parse_args(argv)
    args.psn = args.psn.zfill(2)
    if not args.profile_pan.isdigit() or not 12 <= len(args.profile_pan) <= 19:
        p.error("--profile-pan must be 12 to 19 digits")
    if len(args.imk) != 32 or any(c not in "0123456789abcdefABCDEF" for c in args.imk):
        p.error("--imk must be 32 hex digits")
    if not args.psn.isdigit() or len(args.psn) != 2:
        p.error("--psn must be 2 digits")
    if args.un and len(args.un) != 8:
        p.error("--un must be 8 hex digits")
    try:
        return run(args)
    except Fail as e:
        print(f"\nFAIL: {e}", file=sys.stderr, flush=True)
        return 1
    except EnvironmentNotReady as e:
        print(f"\nENVIRONMENT: {e}", file=sys.stderr, flush=True)
        return 2
    except SmartcardException as e:
        print(f"\nFAIL: PC/SC error: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
