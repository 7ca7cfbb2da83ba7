#!/usr/bin/env python3
"""PC/SC interoperability check for a tap: a contactless virtual card through pcscd, pyscard as the reader.

`cardbench card tap` connects to vsmartcard's vpcd and answers with a PC/SC part 3 ATR
(3B 8n 80 01 … TCK, what a contactless reader makes of an ISO 14443-4 card). This script, as an
Entry Point would: checks that ATR's shape and that pcscd gives the card T=1; SELECTs the PPSE
(2PAY.SYS.DDF01) and takes the application from the directory entries in its FCI (no records to
read); SELECTs it; then
  - Kernel 3 (a Visa AID): the PDOL must ask for the TTQ (9F66); GET PROCESSING OPTIONS with
    "online cryptogram required" returns the ARQC in a format 2 template with the CTQ, and pyemv
    recomputes the ARQC from the PDOL data sent, the AIP, the ATC and the issuer application data;
  - Kernel 2 (a Mastercard AID): GPO, the records the AFL names, GENERATE AC for an ARQC over CDOL1
    (without CDA), checked by pyemv the same way.
A GENERATE AC after a qVSDC GPO must be refused (6985): the GPO's cryptogram is the only one.

Exit status: 0 pass; 1 mismatch; 2 environment. Run by Tests/Interop/run.sh with CARD_VERB=tap.
"""
import argparse
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pcsc_interop as P  # noqa: E402  (shares its TLV, DOL and PC/SC helpers)
from smartcard.CardConnection import CardConnection  # noqa: E402

PPSE = b"2PAY.SYS.DDF01"


def run(args):
    deadline = time.monotonic() + args.timeout
    name = P.wait_for_card(args.reader, args.timeout)
    while True:
        try:
            term = P.Terminal(name, "t1")
            break
        except P.SmartcardException as e:
            if time.monotonic() > deadline:
                raise P.Fail(f"connect to {name!r} with T=1: {e}")
            time.sleep(0.5)
    try:
        return transaction(term, args)
    finally:
        term.close()


def transaction(term, args):
    atr = term.atr
    P.step(1, f"ATR {P.h(atr)}: the PC/SC part 3 form, T=1")
    n = atr[1] & 0x0F if len(atr) > 1 else 0
    tck = 0
    for b in atr[1:]:
        tck ^= b
    if not (len(atr) == 5 + n and atr[0] == 0x3B and atr[1] & 0xF0 == 0x80 and atr[2:4] == b"\x80\x01" and tck == 0):
        raise P.Fail(f"ATR {P.h(atr)} is not 3B 8n 80 01 <n historical bytes> TCK")
    if term.connection.getProtocol() != CardConnection.T1_protocol:
        raise P.Fail(f"pcscd connected the contactless card with {term.protocol}, not T=1")
    print(f"     {n} historical bytes, TCK checks, protocol {term.protocol}")

    P.step(2, "SELECT PPSE: the directory entries are in the FCI")
    fci, sw = term.send(0x00, 0xA4, 0x04, 0x00, PPSE)
    P.expect_ok(sw, "SELECT PPSE")
    tlv = P.parse_tlv(fci, "PPSE FCI")
    if P.find(tlv, 0xBF0C) is None:
        raise P.Fail("the PPSE FCI has no BF0C (FCI issuer discretionary data) with directory entries")
    entries = [c for t, v, c in P.parse_tlv(P.find(tlv, 0xBF0C)) if t == 0x61]
    aids = [P.find(e, 0x4F) for e in entries]
    print(f"     entries: {[P.h(a) for a in aids]}")
    aid = bytes.fromhex(args.aid) if args.aid else aids[0]
    if aid not in aids:
        raise P.Fail(f"the PPSE lists no {P.h(aid)}")
    rr, sw = term.send(0x00, 0xB2, 0x01, 0x0C)
    if sw == 0x9000:
        raise P.Fail("the PPSE answered READ RECORD: a PPSE has no directory file")

    P.step(3, f"SELECT {P.h(aid)}")
    adf, sw = term.send(0x00, 0xA4, 0x04, 0x00, aid)
    P.expect_ok(sw, "SELECT application")
    adf_tlv = P.parse_tlv(adf, "ADF FCI")
    pdol = P.parse_dol(P.find(adf_tlv, 0x9F38) or b"")
    values = P.terminal_data(args)
    values[0x95] = bytes(5)
    values[0x9F39] = b"\x07"
    values[0x9F66] = bytes.fromhex("36804080")  # EMV mode, contact, online PIN, signature; online cryptogram required
    visa = aid.startswith(bytes.fromhex("A000000003"))
    sent = {}

    if visa:
        if not any(t == 0x9F66 for t, _ in pdol):
            raise P.Fail("a Kernel 3 application's PDOL must ask for the TTQ (9F66)")
        P.step(4, "GET PROCESSING OPTIONS (qVSDC): the cryptogram comes back now")
        data = P.build_dol_data(pdol, values, "PDOL", sent)
        gpo, sw = term.send(0x80, 0xA8, 0x00, 0x00, bytes([0x83, len(data)]) + data)
        P.expect_ok(sw, "GET PROCESSING OPTIONS")
        t = P.parse_tlv(gpo, "GPO")
        if not t or t[0][0] != 0x77:
            raise P.Fail(f"a qVSDC GPO response must be template 77, got {P.h(gpo[:2])}")
        found = P.primitives(t, {})
        for tag in (0x82, 0x9F36, 0x9F10, 0x9F26, 0x57, 0x9F6C):
            if tag not in found:
                raise P.Fail(f"the qVSDC response lacks {tag:X}")
        cid = found.get(0x9F27, b"\x80")[0]
        if cid & 0xC0 != 0x80:
            raise P.Fail(f"online cryptogram required, but CID {cid:02X} is not an ARQC")
        ac, iad, atc, aip = found[0x9F26], found[0x9F10], found[0x9F36], found[0x82]
        print(f"     AIP {P.h(aip)} ATC {P.h(atc)} ARQC {P.h(ac)} IAD {P.h(iad)} CTQ {P.h(found[0x9F6C])}")
        _, sw = term.send(0x80, 0xAE, 0x80, 0x00, bytes(29))
        if sw != 0x6985:
            raise P.Fail(f"GENERATE AC after a qVSDC GPO answered {sw:04X}, expected 6985")
        print("     GENERATE AC after it: 6985, as it must")
    else:
        P.step(4, "GET PROCESSING OPTIONS, records (Kernel 2, EMV mode)")
        data = P.build_dol_data(pdol, values, "PDOL", {})
        gpo, sw = term.send(0x80, 0xA8, 0x00, 0x00, bytes([0x83, len(data)]) + data)
        P.expect_ok(sw, "GET PROCESSING OPTIONS")
        found = P.primitives(P.parse_tlv(gpo, "GPO"), {})
        aip, afl = found[0x82], found[0x94]
        if not aip[1] & 0x80:
            raise P.Fail(f"AIP {P.h(aip)}: byte 2 bit 8 (EMV mode) is off")
        for i in range(0, len(afl), 4):
            sfi, first, last = afl[i] >> 3, afl[i + 1], afl[i + 2]
            for rec in range(first, last + 1):
                r, sw = term.send(0x00, 0xB2, rec, sfi << 3 | 4)
                P.expect_ok(sw, f"READ RECORD SFI {sfi} record {rec}")
                P.primitives(P.parse_tlv(r, "record"), found)
        P.step(5, "GENERATE AC for an ARQC over CDOL1 (no CDA)")
        values[0x9F34] = bytes.fromhex("3F0002")
        cdol = P.build_dol_data(P.parse_dol(found[0x8C]), values, "CDOL1", sent)
        r, sw = term.send(0x80, 0xAE, 0x80, 0x00, cdol)
        P.expect_ok(sw, "GENERATE AC")
        g = P.primitives(P.parse_tlv(r, "GENERATE AC"), {})
        ac, iad, atc = g[0x9F26], g[0x9F10], g[0x9F36]
        if g[0x9F27][0] & 0xC0 != 0x80:
            raise P.Fail(f"CID {P.h(g[0x9F27])} is not an ARQC")

    P.step(6, f"verify the cryptogram with pyemv {P.CVN_CLASSES[args.cvn].__name__}")
    kw = dict(tag_9f02=sent[0x9F02], tag_9f03=sent[0x9F03], tag_9f1a=sent[0x9F1A], tag_95=sent[0x95], tag_5f2a=sent[0x5F2A],
              tag_9a=sent[0x9A], tag_9c=sent[0x9C], tag_9f37=sent[0x9F37], tag_82=aip, tag_9f36=atc)
    if args.cvn in (18, 22):
        kw["tag_9f10"] = iad
    elif visa:
        kw["cvr"] = iad[3:7]
    else:
        kw["cvr"] = iad[2:8]
        if args.cvn in (17, 21):
            kw["counters"] = iad[10:18]
    imk = bytes.fromhex(args.imk)
    oracle = P.CVN_CLASSES[args.cvn](iss_mk_ac=imk, iss_mk_smi=imk, iss_mk_smc=imk, pan=args.profile_pan, psn=args.psn)
    expected = oracle.generate_ac(**kw)
    if expected != ac:
        raise P.Fail(f"ARQC mismatch: card {P.h(ac)}, pyemv {P.h(expected)}")
    print(f"     ARQC {P.h(ac)} == pyemv {P.h(expected)}")
    print(f"\nPASS: a tap through pcscd with T=1, {'Kernel 3 qVSDC' if visa else 'Kernel 2'}, {term.apdus} APDUs")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--profile-pan", required=True)
    p.add_argument("--imk", required=True)
    p.add_argument("--cvn", required=True, type=int, choices=sorted(P.CVN_CLASSES))
    p.add_argument("--psn", default="00")
    p.add_argument("--aid")
    p.add_argument("--reader", default="Virtual PCD 00 00")
    p.add_argument("--timeout", type=float, default=30)
    p.add_argument("--amount", type=int, default=15000)
    p.add_argument("--currency", type=int, default=484)
    p.add_argument("--country", type=int, default=484)
    p.add_argument("--un")
    args = p.parse_args(argv)
    args.psn = args.psn.zfill(2)
    try:
        return run(args)
    except P.Fail as e:
        print(f"\nFAIL: {e}", file=sys.stderr, flush=True)
        return 1
    except P.EnvironmentNotReady as e:
        print(f"\nENVIRONMENT: {e}", file=sys.stderr, flush=True)
        return 2
    except P.SmartcardException as e:
        print(f"\nFAIL: PC/SC error: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
