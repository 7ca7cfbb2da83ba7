#!/usr/bin/env python3
"""PC/SC interoperability check of offline data authentication: SDA, DDA and CDA against a virtual card.

A terminal of its own, through the real PC/SC stack (pcscd + vsmartcard's vpcd + pyscard), that
authenticates a `cardbench card insert` card with Tests/Oracle/oda_oracle.py (EMV Book 2 from
`cryptography`, pow() and hashlib; none of cardbench's code):

SELECTs --aid, runs GET PROCESSING OPTIONS (the PDOL data is kept for CDA), reads every record the
AFL names and builds the static data to be authenticated from the records it counts for ODA (SFI
1-10: the value inside 70; then the AIP when 9F4A = 82). It takes the CA key from the --capk file
by the AID's RID and 8F, recovers the issuer key (90/92/9F32); then, as the AIP says: verifies the
signed static data (93) if present; recovers the ICC key (9F46/9F48/9F47); sends INTERNAL
AUTHENTICATE with the DDOL data (9F49, default 9F3704) and verifies the SDAD (format 80 or 77);
VERIFYs the plaintext --pin if given; and sends GENERATE AC for an ARQC with CDA (P1 90) over
CDOL1, expecting format 2 (77 with 9F27 9F36 9F4B [9F10]), and verifies the signature, the CID
inside it against 9F27 and the transaction data hash code.

Prints every C-APDU and R-APDU and each check passed. Exit status: 0 pass; 1 the card answered
wrongly (a failed check, a status word); 2 the environment is not ready. With --expect-failure
CHECK (a name from `oda_oracle.py checks`, or one of the terminal-* names below), 0 only when
exactly that check fails, 1 otherwise.

Run by Tests/Interop/run.sh with TERMINAL=Tests/Interop/oda_interop.py; see Tests/Interop/README.md.
"""
import argparse
import datetime
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "Oracle"))

try:
    import oda_oracle as oda
except ImportError as e:  # pragma: no cover - environment
    print(f"ENVIRONMENT: Tests/Oracle/oda_oracle.py is not importable ({e})", file=sys.stderr)
    sys.exit(2)
try:
    # The PC/SC side (reader waiting, T=0 status handling, TLV and DOL helpers, terminal data)
    # is pcsc_interop.py's, so both tests drive the stack the same way. It needs pyscard and pyemv.
    import pcsc_interop as pc
    from smartcard.Exceptions import SmartcardException
except SystemExit as e:  # pcsc_interop exits with a message when pyscard or pyemv is missing
    print(e.code if isinstance(e.code, str) else "ENVIRONMENT: pcsc_interop.py could not start", file=sys.stderr)
    sys.exit(2)
except ImportError as e:  # pragma: no cover - environment
    print(f"ENVIRONMENT: {e}", file=sys.stderr)
    sys.exit(2)

Fail, EnvironmentNotReady, h = pc.Fail, pc.EnvironmentNotReady, pc.h

# Checks this terminal makes itself (besides oda_oracle.CHECKS).
TERMINAL_CHECKS = {
    "terminal-static-data": "Book 3 §10.3: ODA records are 70 templates; 9F4A lists only 82",
    "terminal-aip": "the AIP offers SDA, DDA or CDA",
    "terminal-capk": "Book 2 §5.2: the CA key (RID of the AID, 8F) is in the --capk file and not expired",
    "terminal-ddol": "Book 3 §6.5.9 / Book 2 §6.5.1: the DDOL asks for the unpredictable number 9F37",
    "terminal-internal-authenticate": "INTERNAL AUTHENTICATE answers format 1 (80) or 2 (77 with 9F4B)",
    "terminal-cdol1": "CDOL1 asks for the unpredictable number 9F37 (CDA signs over it)",
    "terminal-generate-ac": "GENERATE AC with CDA answers format 2 (77) with 9F27 9F36 9F4B, an ARQC or TC",
}


class Checks:
    """Prints each check passed and keeps the list."""

    def __init__(self):
        self.passed = []

    def __call__(self, check, detail=""):
        self.passed.append(check)
        print(f"     ok  {check:24} {detail}")


def terminal_fail(check, message):
    assert check in TERMINAL_CHECKS, check
    return oda.OdaError(check, message)


def run(args):
    t0 = time.monotonic()
    pc.step(0, f"wait for reader {args.reader!r} and a card (up to {args.timeout:.0f} s)")
    deadline = t0 + args.timeout
    while True:
        name = pc.wait_for_card(args.reader, max(deadline - time.monotonic(), 0.5))
        print(f"     card present in {name!r} after {time.monotonic() - t0:.2f} s")
        try:
            term = pc.Terminal(name, "any")
            break
        except SmartcardException as e:
            if time.monotonic() > deadline:
                raise Fail(f"connect to {name!r}: {e}")
            print(f"     connect failed ({e}); retrying")
            time.sleep(0.5)
    try:
        return transaction(term, args)
    finally:
        term.close()


def read_capk(path, rid, index, today):
    try:
        keys = oda.load_capk_yaml(path)
    except (OSError, ValueError, KeyError) as e:
        raise EnvironmentNotReady(f"--capk {path}: {e}")
    entry = next((k for k in keys if k["rid"] == h(rid) and k["index"] == "%02X" % index), None)
    if entry is None:
        raise terminal_fail("terminal-capk", f"no CA key {h(rid)}/{index:02X} in {path} "
                                             f"(it has {', '.join(k['rid'] + '/' + k['index'] for k in keys)})")
    expiry = entry.get("expiry")
    if expiry and expiry.replace("-", "")[2:] < today:
        raise terminal_fail("terminal-capk", f"CA key {h(rid)}/{index:02X} expired on {expiry}")
    return entry


def transaction(term, args):
    t_start = time.monotonic()
    checks = Checks()
    today = datetime.date.today().strftime("%y%m%d")
    print(f"     ATR {h(term.atr)}; {term.protocol}")

    aid = bytes.fromhex(args.aid)
    pc.step(1, f"SELECT {h(aid)}")
    fci, sw = term.send(0x00, 0xA4, 0x04, 0x00, aid)
    pc.expect_ok(sw, f"SELECT {h(aid)}")
    fci_tlv = pc.parse_tlv(fci, "application FCI")
    if not fci_tlv or fci_tlv[0][0] != 0x6F:
        raise Fail(f"application FCI is not a 6F template: {h(fci)}")
    pdol = pc.parse_dol(pc.find(fci_tlv, 0x9F38) or b"")
    print(f"     PDOL: {' '.join('%X[%d]' % (t, n) for t, n in pdol) or 'none'}")

    values = pc.terminal_data(args)
    sent = {}
    pc.step(2, "GET PROCESSING OPTIONS")
    pdol_data = pc.build_dol_data(pdol, values, "PDOL", sent)
    resp, sw = term.send(0x80, 0xA8, 0x00, 0x00, bytes([0x83, len(pdol_data)]) + pdol_data)
    pc.expect_ok(sw, "GET PROCESSING OPTIONS")
    tlv = pc.parse_tlv(resp, "GPO response")
    if len(tlv) != 1 or tlv[0][0] not in (0x80, 0x77):
        raise Fail(f"GPO response is neither format 1 (80) nor format 2 (77): {h(resp)}")
    if tlv[0][0] == 0x80:
        aip, afl = tlv[0][1][:2], tlv[0][1][2:]
    else:
        aip, afl = pc.find(tlv, 0x82), pc.find(tlv, 0x94)
    if aip is None or len(aip) != 2 or not afl or len(afl) % 4:
        raise Fail(f"GPO response without a 2-byte AIP or a valid AFL: {h(resp)}")
    sda, dda, cda = bool(aip[0] & 0x40), bool(aip[0] & 0x20), bool(aip[0] & 0x01)
    print(f"     AIP {h(aip)} (SDA {'yes' if sda else 'no'}, DDA {'yes' if dda else 'no'}, "
          f"CDA {'yes' if cda else 'no'}), AFL {h(afl)}; PDOL data {h(pdol_data) or '(none)'}")

    pc.step(3, "READ RECORD per AFL; the static data to be authenticated")
    card, oda_records = {}, []
    for i in range(0, len(afl), 4):
        sfi, first, last, count = afl[i] >> 3, afl[i + 1], afl[i + 2], afl[i + 3]
        if not (1 <= sfi <= 30 and 1 <= first <= last and count <= last - first + 1):
            raise Fail(f"malformed AFL entry {h(afl[i:i + 4])}")
        for record in range(first, last + 1):
            data, sw = term.send(0x00, 0xB2, record, sfi << 3 | 4)
            pc.expect_ok(sw, f"READ RECORD SFI {sfi} record {record}")
            if record < first + count:
                oda_records.append((sfi, data))
                print(f"     (SFI {sfi} record {record} counts for ODA)")
            tlv = pc.parse_tlv(data, f"SFI {sfi} record {record}")
            pc.primitives(tlv, card)
    tag_list = card.get(0x9F4A)
    static = oda.static_data_to_authenticate(oda_records, aip, tag_list)
    print(f"     static data to be authenticated ({len(static)} bytes{', with the AIP (9F4A)' if tag_list else ''}): "
          f"{h(static)}")
    checks("terminal-static-data", f"{len(oda_records)} records")
    pan = card.get(0x5A)
    if pan is None:
        raise Fail("no PAN (5A) in the records")
    tags = {"%X" % t: v for t, v in card.items()}

    if not (sda or dda or cda):
        raise terminal_fail("terminal-aip", f"AIP {h(aip)} offers no offline data authentication")
    checks("terminal-aip", h(aip))

    pc.step(4, "CA public key, then the issuer public key (Book 2 §5.3)")
    index = card.get(0x8F)
    if index is None or len(index) != 1:
        raise oda.OdaError("issuer-data-missing", "no CA public key index (8F) in the records")
    capk = read_capk(args.capk, aid[:5], index[0], today)
    print(f"     CA key {capk['rid']}/{capk['index']} ({len(capk['modulus']) * 4} bits): {capk.get('name', '')}")
    checks("terminal-capk", f"{capk['rid']}/{capk['index']}, checksum verified")
    issuer = oda.recover_issuer(capk, tags, pan, today, log=checks)
    print(f"     issuer key {issuer['publicKeyLength'] * 8} bits, exponent {issuer['exponent']}, "
          f"identifier {issuer['issuerIdentifier']}, serial {issuer['serial']}")

    n = 5
    if 0x93 in card:
        pc.step(n, "signed static application data 93 (Book 2 §5.4)")
        n += 1
        s = oda.verify_ssad(oda.pub(issuer), card[0x93], static, log=checks)
        print(f"     data authentication code {s['dac']}")
    elif sda and not (dda or cda):
        raise oda.OdaError("ssad-data-missing", "the AIP offers only SDA and the card has no 93")

    if dda or cda:
        pc.step(n, "ICC public key (Book 2 §6.4)")
        n += 1
        icc = oda.recover_icc(oda.pub(issuer), tags, pan, static, today, log=checks)
        icc_pub = oda.pub(icc)
        print(f"     ICC key {icc['publicKeyLength'] * 8} bits, exponent {icc['exponent']}, serial {icc['serial']}")

    if dda:
        ddol = pc.parse_dol(card.get(0x9F49) or bytes.fromhex("9F3704"))
        pc.step(n, f"INTERNAL AUTHENTICATE over the DDOL {h(card.get(0x9F49) or b'')or '9F3704 (default)'} "
                   "(Book 2 §6.5)")
        n += 1
        if not any(t == 0x9F37 for t, _ in ddol):
            raise terminal_fail("terminal-ddol", f"DDOL {h(card.get(0x9F49))} does not ask for 9F37")
        ddol_data = pc.build_dol_data(ddol, values, "DDOL", {})
        resp, sw = term.send(0x00, 0x88, 0x00, 0x00, ddol_data)
        pc.expect_ok(sw, "INTERNAL AUTHENTICATE")
        tlv = pc.parse_tlv(resp, "INTERNAL AUTHENTICATE response")
        if len(tlv) == 1 and tlv[0][0] == 0x80:
            sdad, fmt = tlv[0][1], 1
        elif len(tlv) == 1 and tlv[0][0] == 0x77 and pc.find(tlv, 0x9F4B) is not None:
            sdad, fmt = pc.find(tlv, 0x9F4B), 2
        else:
            raise terminal_fail("terminal-internal-authenticate", f"neither 80 nor 77 with 9F4B: {h(resp)}")
        checks("terminal-internal-authenticate", f"format {fmt}")
        d = oda.verify_sdad_dda(icc_pub, sdad, ddol_data, log=checks)
        print(f"     ICC dynamic number {d['iccDynamicNumber']}")

    if args.pin:
        pc.step(n, "VERIFY the plaintext PIN (P2 80)")
        n += 1
        pin = args.pin
        block = bytes.fromhex(("2%X" % len(pin) + pin).ljust(16, "F"))
        _, sw = term.send(0x00, 0x20, 0x00, 0x80, block, le=False)
        pc.expect_ok(sw, "VERIFY plaintext PIN")

    if cda:
        pc.step(n, "GENERATE AC for an ARQC with CDA (P1 90) over CDOL1 (Book 2 §6.6)")
        n += 1
        cdol1_raw = card.get(0x8C)
        if cdol1_raw is None:
            raise Fail("no CDOL1 (8C) in the records")
        cdol1 = pc.parse_dol(cdol1_raw)
        if not any(t == 0x9F37 for t, _ in cdol1):
            raise terminal_fail("terminal-cdol1", f"CDOL1 {h(cdol1_raw)} does not ask for 9F37")
        if 0x9F08 in card:
            values[0x9F09] = card[0x9F08]
        cdol_sent = {}
        cdol1_data = pc.build_dol_data(cdol1, values, "CDOL1", cdol_sent)
        resp, sw = term.send(0x80, 0xAE, 0x90, 0x00, cdol1_data)
        pc.expect_ok(sw, "GENERATE AC")
        top = oda.split_tlv(resp)
        if len(top) != 1 or top[0][0] != 0x77:
            raise terminal_fail("terminal-generate-ac", f"CDA needs format 2 (77), got {h(resp)}")
        inner = {t: v for t, v, _ in oda.split_tlv(top[0][1])}
        missing = [f"{t:X}" for t in (0x9F27, 0x9F36, 0x9F4B) if t not in inner]
        if missing:
            raise terminal_fail("terminal-generate-ac", f"77 lacks {', '.join(missing)}: {h(resp)}")
        cid = inner[0x9F27]
        kind = {0x00: "AAC", 0x40: "TC", 0x80: "ARQC"}.get(cid[0] & 0xC0, "RFU")
        if kind not in ("ARQC", "TC"):
            raise terminal_fail("terminal-generate-ac", f"CID {h(cid)} ({kind}) to an ARQC request with CDA")
        print(f"     CID {h(cid)} ({kind}), ATC {h(inner[0x9F36])}, IAD {h(inner.get(0x9F10, b''))}, "
              f"response TLVs {' '.join('%X' % t for t, _, _ in oda.split_tlv(top[0][1]))}")
        checks("terminal-generate-ac", f"format 2, {kind}")
        tdhc_data = oda.tdhc_input(pdol_data, cdol1_data, top[0][1])
        print(f"     transaction data hash code input: {h(tdhc_data)}")
        c = oda.verify_sdad_cda(icc_pub, inner[0x9F4B], cdol_sent[0x9F37], cid, tdhc_data, log=checks)
        print(f"     signed AC {c['ac']}, ICC dynamic number {c['iccDynamicNumber']}")

    methods = "+".join(m for m, on in (("SDA", 0x93 in card), ("DDA", dda), ("CDA", cda)) if on)
    print(f"\nPASS: {methods}, {len(checks.passed)} checks, {term.apdus} APDUs in {time.monotonic() - t_start:.2f} s")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--aid", default="A0000000031010", help="application to select (hex; default A0000000031010)")
    p.add_argument("--capk", required=True, help="CAPK file (YAML, notes/oda-design.md format)")
    p.add_argument("--pin", help="VERIFY this plaintext PIN before GENERATE AC (digits)")
    p.add_argument("--expect-failure", metavar="CHECK",
                   help="exit 0 only if this check fails (a faulty card); see `oda_oracle.py checks`")
    p.add_argument("--reader", default="Virtual PCD 00 00", help="PC/SC reader name or its prefix")
    p.add_argument("--timeout", type=float, default=30, help="seconds to wait for the reader and card (default 30)")
    p.add_argument("--amount", type=int, default=1000, help="amount authorised in minor units (default 1000)")
    p.add_argument("--currency", type=int, default=484, help="ISO 4217 numeric currency (default 484)")
    p.add_argument("--country", type=int, default=484, help="ISO 3166 numeric terminal country (default 484)")
    p.add_argument("--un", help="unpredictable number, 8 hex digits (default random)")
    args = p.parse_args(argv)
    if args.pin and not (args.pin.isdigit() and 4 <= len(args.pin) <= 12):
        p.error("--pin must be 4 to 12 digits")
    if args.un and len(args.un) != 8:
        p.error("--un must be 8 hex digits")
    if args.expect_failure and args.expect_failure not in oda.CHECKS and args.expect_failure not in TERMINAL_CHECKS:
        p.error(f"--expect-failure: unknown check {args.expect_failure!r} "
                f"(known: {', '.join(list(oda.CHECKS) + list(TERMINAL_CHECKS))})")
    expected = args.expect_failure
    try:
        run(args)
        if expected:
            print(f"\nFAIL: every check passed; --expect-failure {expected} wanted that one to fail",
                  file=sys.stderr, flush=True)
            return 1
        return 0
    except oda.OdaError as e:
        if expected and e.check == expected:
            print(f"\nPASS: the expected check failed: {e}", flush=True)
            return 0
        extra = f" (expected {expected} to fail)" if expected else ""
        print(f"\nFAIL: {e}{extra}", file=sys.stderr, flush=True)
        return 1
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
