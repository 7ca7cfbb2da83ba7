#!/usr/bin/env python3
"""ODA the other way round: the oracle personalises a card, cardbench's kernel must authenticate it.

Tests/Oracle/oda_oracle.py (EMV Book 2 from `cryptography`, pow() and hashlib) makes a CA of its
own (1408-bit, e=3, index B9 under RID A000000003) and writes a CAPK file for it; makes an issuer
key (1152-bit, e=3, so 90 needs a remainder 92) and an ICC key (1024-bit, e=65537, so 9F46 needs a
remainder 9F48); and takes a Visa CVN 10 profile (a copy of Scenarios/cards/visa-credit-cvn10.yaml
with `generateACFormat: 2`). It reads the card's records with
`cardbench emv records --card P --aid A0000000031010 --json`, but computes the static data to be
authenticated itself from the records' bytes (SFI 1-10: the value inside 70; then the AIP, as the
card's 9F4A = 82), and signs 90/92/9F32, 93 and 9F46/9F48/9F47 over it into the profile's `oda:`
block (SDA, DDA and CDA).

Then it runs `cardbench sale --card P --amount 10.00 --capk CAPK --ledger DIR/l.sqlite --json`:
  - the genuine card: oda.method "cda", oda.result "passed", and TVR byte 1 with none of 80 (ODA not
    performed), 40 (SDA failed), 20 (ICC data missing), 08 (DDA failed), 04 (CDA failed);
  - a byte of 90 flipped; a byte of 9F46 flipped; 8F naming a key the CAPK file lacks; the issuer
    certificate re-signed with expiry 01/20; a signed record changed after signing (the profile's
    `effective:` moved a month, which is 5F25 in SFI 2 record 1): each oda.result "failed" with
    TVR byte 1 bit 04 (CDA failed) set.
Prints a PASS/FAIL line per case. Exit status: 0 all pass, 1 a case failed, 2 the environment is
not ready (no cardbench binary, a command it does not have).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Oracle"))
import oda_oracle as oda  # noqa: E402

AID = "A0000000031010"
RID = "A000000003"
CA_INDEX = "B9"
# TVR byte 1 bits (EMV Book 3 Annex C5).
TVR_ODA_NOT_PERFORMED, TVR_SDA_FAILED, TVR_ICC_DATA_MISSING = 0x80, 0x40, 0x20
TVR_DDA_FAILED, TVR_CDA_FAILED = 0x08, 0x04
TVR_FAILURE_BITS = {TVR_ODA_NOT_PERFORMED: "ODA not performed", TVR_SDA_FAILED: "SDA failed",
                    TVR_ICC_DATA_MISSING: "ICC data missing", TVR_DDA_FAILED: "DDA failed",
                    TVR_CDA_FAILED: "CDA failed"}

# A copy of Scenarios/cards/visa-credit-cvn10.yaml (so a change there does not change this test),
# with generateACFormat: 2: CDA's signature comes in 9F4B of a format 2 (77) response.
BASE_PROFILE = """\
# Visa credit, CVN 10, offline plaintext PIN (then signature, then no CVM); ODA keys and
# certificates by Tests/Interop/oda_reverse.py.
name: Visa credit (CVN 10, offline PIN, ODA by the oracle)
pan: "4761739001010010"
psn: "01"
expiry: "2031-12"
effective: "2024-01"
cardholderName: "CARDBENCH/VISA CREDIT"
serviceCode: "201"
cvv: "123"
pin: "1234"
pinTryLimit: 3
atc: 1
issuer: { name: "Banco Cardbench", accountType: credit }
installments: { supported: true, maximum: 12 }
issuerState: { balance: "50000.00", currency: "484" }
applications:
  - aid: "A0000000031010"
    label: "VISA CREDITO"
    preferredName: "VISA CREDITO"
    priority: 1
    cvn: 10
    generateACFormat: 2
    issuerMasterKey: "0123456789ABCDEFFEDCBA9876543210"
    # 41 03: plaintext PIN by ICC if the terminal supports it, else next; 1E 03: signature; 1F 00: no CVM.
    cvmList: "000000000000000041031E031F00"
    iac: { default: "DC4000A800", denial: "0010000000", online: "DC4004F800" }
    offlineLimits: { lower: 5, upper: 10 }
"""
PAN = "4761739001010010"
EFFECTIVE_LINE = 'effective: "2024-01"'
TAMPERED_EFFECTIVE_LINE = 'effective: "2024-02"'
ISSUER_EXPIRY, ICC_EXPIRY = "1232", "1231"


class EnvironmentNotReady(Exception):
    pass


class CaseFailed(Exception):
    pass


def hx(b):
    return bytes(b).hex().upper()


def flip(hex_text, at=None):
    """`hex_text` with one byte (the middle one by default) XORed with 01."""
    b = bytearray(bytes.fromhex(hex_text))
    i = len(b) // 2 if at is None else at
    b[i] ^= 0x01
    return hx(b)


class Card:
    """The card's keys and the objects signed over its static data."""

    def __init__(self, ca, issuer, icc):
        self.ca, self.issuer, self.icc = ca, issuer, icc
        self.static = None

    def sign(self, static, issuer_expiry=ISSUER_EXPIRY):
        self.static = static
        self.c90, self.c92, self.c9f32 = oda.issuer_certificate(self.ca, self.issuer, PAN, issuer_expiry, "0000B9")
        self.c93 = oda.ssad(self.issuer, bytes.fromhex("DAC5"), static)
        self.c9f46, self.c9f48, self.c9f47 = oda.icc_certificate(self.issuer, self.icc, PAN, ICC_EXPIRY, "000001",
                                                                 static)

    def fields(self):
        n, _, d = self.icc
        size = oda.modulus_length(n)
        return {
            "issuerCertificate": hx(self.c90), "issuerRemainder": hx(self.c92), "issuerExponent": hx(self.c9f32),
            "signedStaticData": hx(self.c93), "iccCertificate": hx(self.c9f46), "iccRemainder": hx(self.c9f48),
            "iccExponent": hx(self.c9f47), "iccModulus": hx(n.to_bytes(size, "big")),
            "iccPrivateExponent": hx(d.to_bytes(size, "big")),
        }

    def self_check(self, capk_entry, today=None):
        """The oracle's own verification of what it signed (a bug here is the test's, not cardbench's)."""
        today = today or datetime.date.today().strftime("%y%m%d")
        tags = {"90": self.c90, "92": self.c92, "9F32": self.c9f32, "9F46": self.c9f46, "9F48": self.c9f48,
                "9F47": self.c9f47}
        issuer = oda.recover_issuer(capk_entry, tags, PAN, today)
        oda.verify_ssad(oda.pub(issuer), self.c93, self.static)
        icc = oda.recover_icc(oda.pub(issuer), tags, PAN, self.static, today)
        assert oda.pub(icc) == self.icc[:2]


def oda_block(fields, ca_index=CA_INDEX):
    lines = ["oda:", f'  - aid: "{AID}"', "    methods: [sda, dda, cda]", f'    caIndex: "{ca_index}"']
    for key in ("issuerCertificate", "issuerRemainder", "issuerExponent", "signedStaticData", "iccCertificate",
                "iccRemainder", "iccExponent", "iccModulus", "iccPrivateExponent"):
        if fields[key]:  # a remainder is absent when the modulus fits
            lines.append(f'    {key}: "{fields[key]}"')
    lines += ['    staticDataTagList: "82"', '    ddol: "9F3704"']
    return "\n".join(lines) + "\n"


def profile_text(fields=None, ca_index=CA_INDEX, base=BASE_PROFILE):
    return base + ("" if fields is None else oda_block(fields, ca_index))


class Bench:
    def __init__(self, binary, workdir, verbose):
        self.binary, self.workdir, self.verbose = binary, workdir, verbose

    def write(self, name, text):
        path = os.path.join(self.workdir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run(self, *argv, timeout=120):
        cmd = [self.binary, *argv]
        if self.verbose:
            print("  $ " + " ".join(cmd))
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except FileNotFoundError:
            raise EnvironmentNotReady(f"{self.binary}: not found")
        except subprocess.TimeoutExpired:
            raise CaseFailed(f"{' '.join(argv[:2])} did not finish in {timeout} s")
        return p

    def records(self, profile):
        p = self.run("emv", "records", "--card", profile, "--aid", AID, "--json")
        if p.returncode != 0:
            text = (p.stderr or p.stdout).strip()
            if "Unexpected argument" in text or "unknown" in text.lower() and "records" in text:
                raise EnvironmentNotReady(f"`cardbench emv records` is not available: {text.splitlines()[0]}")
            raise CaseFailed(f"emv records exited {p.returncode}: {text[-800:]}")
        try:
            return json.loads(p.stdout)
        except json.JSONDecodeError:
            raise CaseFailed(f"emv records printed no JSON: {p.stdout[-400:]}")

    def sale(self, profile, capk, ledger):
        p = self.run("sale", "--card", profile, "--amount", "10.00", "--capk", capk, "--ledger", ledger, "--json")
        try:
            out = json.loads(p.stdout)
        except json.JSONDecodeError:
            raise CaseFailed(f"sale exited {p.returncode} without JSON: {(p.stderr or p.stdout).strip()[-800:]}")
        return out, p


def static_from_records(listing):
    """The static data to be authenticated from the `emv records` listing, computed here: the
    records marked for ODA in the order listed (the AFL's), then the AIP (9F4A = 82)."""
    # cardbench prints records with the PAN masked (476173******0010, as everywhere it shows
    # card data); this card's PAN is ours, so put it back before hashing.
    masked = PAN[:6] + "*" * (len(PAN) - 10) + PAN[-4:]
    records = [(r["sfi"], bytes.fromhex(r["hex"].replace(masked, PAN))) for r in listing["records"] if r.get("oda")]
    if not records:
        raise CaseFailed("`emv records` lists no record for ODA")
    return oda.static_data_to_authenticate(records, bytes.fromhex(listing["aip"]), b"\x82")


def personalise(bench, card):
    """Signs over the card's static data until the profile's records agree with what was signed
    (the `oda:` block sets the AIP bits, and the AIP is signed, so the first guess may move)."""
    listing = bench.records(bench.write("base.yaml", profile_text()))
    aip = bytearray(bytes.fromhex(listing["aip"]))
    aip[0] |= 0x40 | 0x20 | 0x01  # methods sda, dda, cda
    listing = dict(listing, aip=hx(aip))
    static = static_from_records(listing)
    for attempt in range(3):
        card.sign(static)
        path = bench.write("card.yaml", profile_text(card.fields()))
        listing = bench.records(path)
        now = static_from_records(listing)
        given = listing.get("staticData")
        given = given.replace(PAN[:6] + "*" * (len(PAN) - 10) + PAN[-4:], PAN) if given else given
        if given is not None and given.upper() != hx(now):
            raise CaseFailed(f"cardbench's staticData {given} differs from the oracle's {hx(now)} for the same records")
        if now == static:
            print(f"  static data to be authenticated ({len(static)} bytes, AIP {listing['aip']}): {hx(static)}")
            return path
        static = now
    raise CaseFailed("the static data kept changing between personalisations")


def check_passed(out):
    o = out.get("oda") or {}
    tvr = out.get("tvr")
    if o.get("method") != "cda" or o.get("result") != "passed":
        raise CaseFailed(f"oda {json.dumps(o)}; expected method cda, result passed")
    if not tvr or len(tvr) != 10:
        raise CaseFailed(f"tvr {tvr!r} is not 5 bytes of hex")
    b1 = int(tvr[:2], 16)
    bad = [name for bit, name in TVR_FAILURE_BITS.items() if b1 & bit]
    if bad:
        raise CaseFailed(f"TVR {tvr}: byte 1 says {', '.join(bad)}")
    return f"oda {o.get('method')}/{o.get('result')}, TVR {tvr}"


def check_failed(out):
    o = out.get("oda") or {}
    tvr = out.get("tvr")
    if o.get("result") != "failed":
        raise CaseFailed(f"oda {json.dumps(o)}; expected result failed")
    if not tvr or len(tvr) != 10:
        raise CaseFailed(f"tvr {tvr!r} is not 5 bytes of hex")
    if not int(tvr[:2], 16) & TVR_CDA_FAILED:
        raise CaseFailed(f"TVR {tvr}: byte 1 lacks 04 (CDA failed); oda {json.dumps(o)}")
    return f"oda {o.get('method')}/failed ({o.get('failure', '?')}), TVR {tvr}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cardbench", default=".build/debug/cardbench", help="cardbench binary")
    p.add_argument("--workdir", help="directory for the profiles, CAPK file and ledger (default: a new /tmp one)")
    p.add_argument("--verbose", action="store_true", help="print the commands and the sale JSON")
    args = p.parse_args(argv)
    if not os.access(args.cardbench, os.X_OK):
        print(f"ENVIRONMENT: {args.cardbench} is not executable (swift build first)", file=sys.stderr)
        return 2
    workdir = args.workdir or tempfile.mkdtemp(prefix="cardbench-oda-reverse.")
    os.makedirs(workdir, exist_ok=True)
    bench = Bench(os.path.abspath(args.cardbench), workdir, args.verbose)
    print(f"oda_reverse: files in {workdir}")

    print("generating keys: CA 1408-bit e=3, issuer 1152-bit e=3, ICC 1024-bit e=65537")
    ca, issuer, icc = oda.rsa_keypair(1408, 3), oda.rsa_keypair(1152, 3), oda.rsa_keypair(1024, 65537)
    capk_entry = {"rid": RID, "index": CA_INDEX, "modulus": hx(oda.modulus_bytes(ca[0])),
                  "exponent": hx(oda.exponent_bytes(ca[1])), "expiry": "2035-12-31",
                  "name": "oda_reverse.py test CA B9 (1408-bit)", "source": "generated by Tests/Interop/oda_reverse.py"}
    capk = bench.write("capk.yaml", oda.capk_yaml([capk_entry]))
    card = Card(ca, issuer, icc)
    ledger = os.path.join(workdir, "l.sqlite")

    try:
        good = personalise(bench, card)
    except EnvironmentNotReady as e:
        print(f"ENVIRONMENT: {e}", file=sys.stderr)
        return 2
    except CaseFailed as e:
        print(f"FAIL personalisation: {e}")
        return 1
    card.self_check(capk_entry)
    print(f"  90 {len(card.c90)} bytes, 92 {len(card.c92)} bytes, 9F46 {len(card.c9f46)} bytes, "
          f"9F48 {len(card.c9f48)} bytes; the oracle verifies its own card")
    fields = card.fields()
    good_text = profile_text(fields)

    expired = Card(ca, issuer, icc)
    expired.sign(card.static, issuer_expiry="0120")
    cases = [
        ("genuine card (SDA+DDA+CDA)", good, check_passed),
        ("a byte of 90 flipped",
         bench.write("flip-90.yaml", profile_text(dict(fields, issuerCertificate=flip(fields["issuerCertificate"])))),
         check_failed),
        ("a byte of 9F46 flipped",
         bench.write("flip-9F46.yaml", profile_text(dict(fields, iccCertificate=flip(fields["iccCertificate"])))),
         check_failed),
        ("8F names B8, which the CAPK file lacks",
         bench.write("wrong-8F.yaml", profile_text(fields, ca_index="B8")), check_failed),
        ("issuer certificate expired (01/20)",
         bench.write("expired-90.yaml", profile_text(dict(fields, **{k: v for k, v in expired.fields().items()
                                                                     if k.startswith("issuer")}))), check_failed),
        ("signed record changed after signing (effective 2024-02: 5F25)",
         bench.write("tampered-record.yaml", good_text.replace(EFFECTIVE_LINE, TAMPERED_EFFECTIVE_LINE, 1)),
         check_failed),
    ]
    assert EFFECTIVE_LINE in good_text
    failures = 0
    for title, profile, check in cases:
        try:
            out, proc = bench.sale(profile, capk, ledger)
            if args.verbose:
                print(json.dumps(out, indent=1))
            detail = check(out)
            print(f"PASS {title}: {detail}")
        except CaseFailed as e:
            failures += 1
            print(f"FAIL {title}: {e}  [{os.path.basename(profile)}]")
        except EnvironmentNotReady as e:
            print(f"ENVIRONMENT: {e}", file=sys.stderr)
            return 2
    print(f"\n{'PASS' if not failures else 'FAIL'}: {len(cases) - failures} of {len(cases)} cases")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
