#!/usr/bin/env python3
"""The bench console in a real browser: Debian's Chromium, headless, driven by Selenium through
Debian's chromedriver, against a real cardbenchd (docs/console.md).

Usage: console_test.py --cardbenchd PATH --scenarios DIR --screenshots DIR

It starts the daemon on a temporary state directory with its TCP API on a free loopback port,
signs in with the token, inserts a card on the terminal's slot, opens a Viva sale URL, types
the PIN on the on-screen keypad, checks the approved outcome and the decoded trace, runs a
scenario folder and checks its count and JUnit report, exercises the host controls and the
transaction filters, opens the host-side transaction of an ISO 8583 0200 sent with pyiso8583,
refuses a wrong token, checks every control has a label, and saves a
screenshot of each page (desktop and phone sized) into the screenshots folder.
"""
import argparse
import glob
import json
import os
import pathlib
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET

import iso8583
from iso8583.specs import default as iso_default

from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

FAILURES = []

# Runs in the page: every input, select and textarea has a label (or aria-label), every button a name.
LABEL_CHECK = """
const out = [];
for (const e of document.querySelectorAll('input, select, textarea')) {
  const labelled = (e.id && document.querySelector(`label[for="${e.id}"]`)) || e.getAttribute('aria-label');
  if (!labelled) out.push(location.hash + ' ' + e.outerHTML.slice(0, 80));
}
for (const b of document.querySelectorAll('button')) {
  if (!(b.textContent.trim() || b.getAttribute('aria-label'))) out.push(location.hash + ' ' + b.outerHTML.slice(0, 80));
}
return out;
"""

# Runs in the page: each element with text of its own, its colour against the first opaque
# background behind it (its own or an ancestor's), as WCAG's relative luminance defines contrast.
CONTRAST_CHECK = """
const parse = (c) => { const m = c.match(/rgba?\\(([^)]+)\\)/); if (!m) return null;
  const p = m[1].split(',').map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
  return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
const background = (e) => { for (let n = e; n; n = n.parentElement) { const c = parse(getComputedStyle(n).backgroundColor);
  if (c && c.a > 0.5) return c; } return {r: 255, g: 255, b: 255, a: 1}; };
const out = [];
let checked = 0;
for (const e of document.body.querySelectorAll('*')) {
  if (!e.offsetParent && getComputedStyle(e).position !== 'fixed') continue;
  if (e.closest('[disabled], .visually-hidden, script, style')) continue;
  const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
  if (!own) continue;
  const s = getComputedStyle(e);
  checked += 1;
  const fg = parse(s.color), bg = background(e);
  const a = lum(fg) + 0.05, b = lum(bg) + 0.05;
  const ratio = Math.max(a, b) / Math.min(a, b);
  const size = parseFloat(s.fontSize), bold = Number(s.fontWeight) >= 700;
  const need = size >= 24 || (bold && size >= 18.66) ? 3 : 4.5;
  if (ratio < need) out.push(`${location.hash} ${e.tagName.toLowerCase()}.${e.className} "${e.textContent.trim().slice(0, 30)}" ${ratio.toFixed(2)}`);
}
return {low: out, checked};
"""


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        FAILURES.append(what)


def start_daemon(binary, scenarios, work):
    config = work / "cardbenchd.yaml"
    config.write_text(
        "http:\n  port: 0\n"
        f"scenarios:\n  directory: {scenarios}\n"
        "terminals: [bench1, bench2]\n"
        "callbacks:\n  allowed_hosts: []\n"
        "host:\n  iso8583:\n    listen: 0\n")
    log = open(work / "cardbenchd.log", "wb")
    proc = subprocess.Popen([binary, "--config", str(config), "--state-directory", str(work / "state"),
                             "--runtime-directory", str(work / "run")], stdout=log, stderr=subprocess.STDOUT)
    port_file, token_file = work / "run" / "http.port", work / "run" / "api.token"
    for _ in range(300):
        if port_file.exists() and token_file.exists() and port_file.read_text().strip():
            return proc, int(port_file.read_text()), token_file.read_text().strip()
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    sys.exit("cardbenchd did not start:\n" + (work / "cardbenchd.log").read_text())


def api(base, token, path):
    request = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return json.loads(reply.read())


def iso8583_sale(port):
    """An external terminal's 0200 to the daemon's issuer (pyiso8583, 2-byte length frames): the
    visa-credit-cvn10 card by its number, no chip data. Returns the answer's fields."""
    request = {"t": "0200", "2": "4761739001010010", "3": "000000", "4": "000000004321", "7": "1125120000",
               "11": "000777", "22": "012", "41": "20000001", "42": "CONSOLETEST0001", "49": "978"}
    raw, _ = iso8583.encode(request, iso_default)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(struct.pack(">H", len(raw)) + bytes(raw))
        length = struct.unpack(">H", s.recv(2, socket.MSG_WAITALL))[0]
        answer, _ = iso8583.decode(bytearray(s.recv(length, socket.MSG_WAITALL)), iso_default)
    return answer


def browser(downloads):
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1366,1000",
                "--lang=en-GB"]:
        options.add_argument(arg)
    # Save as scenario saves the scenario and its card: two downloads from one click.
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False,
                                              "profile.default_content_setting_values.automatic_downloads": 1})
    return webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cardbenchd", required=True)
    parser.add_argument("--scenarios", required=True)
    parser.add_argument("--folder", default="magstripe", help="the scenario folder to run")
    parser.add_argument("--screenshots", required=True)
    args = parser.parse_args()
    shots = pathlib.Path(args.screenshots)
    shots.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="cardbench-console-"))
    downloads = work / "downloads"
    downloads.mkdir()
    proc, port, token = start_daemon(args.cardbenchd, os.path.abspath(args.scenarios), work)
    base = f"http://127.0.0.1:{port}"
    driver = browser(downloads)
    wait = WebDriverWait(driver, 30)

    def text():
        return driver.find_element(By.TAG_NAME, "body").text

    def shot(name):
        driver.save_screenshot(str(shots / f"{name}.png"))

    def wait_text(what, timeout=30):
        try:
            WebDriverWait(driver, timeout).until(lambda d: what in d.find_element(By.TAG_NAME, "body").text)
            return True
        except TimeoutException:
            return False

    try:
        # Without a token the page asks for one; a wrong token is refused with a message.
        driver.get(base + "/console/")
        wait.until(EC.presence_of_element_located((By.ID, "token")))
        check("Sign in" in text(), "without a token the console asks for it")
        driver.find_element(By.ID, "token").send_keys("not-the-token-" + "x" * 30)
        driver.find_element(By.CSS_SELECTOR, "form.signin button[type=submit]").click()
        check(wait_text("not this daemon's"), "a wrong token is refused, and the page says so")
        shot("01-sign-in")

        # The link `cardbench console` prints signs in; the token leaves the address bar.
        driver.get(base + f"/console/#token={token}")
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "article.terminal[data-terminal=bench1]")))
        check("token=" not in driver.current_url, "the token is taken out of the address bar")
        check(wait_text("live"), "the event stream is live")
        panel = driver.find_element(By.CSS_SELECTOR, "article.terminal[data-terminal=bench1]")
        check("TID 10000001" in panel.text, "the terminal panel shows the TID")

        # Card slot: insert the demo card's profile.
        Select(panel.find_element(By.CSS_SELECTOR, "select[id$=-profile]")).select_by_value("visa-credit-cvn10")
        panel.find_element(By.CSS_SELECTOR, "button[data-verb=insert]").click()
        check(wait_text("visa-credit-cvn10 (inserted)"), "the card slot shows the inserted card")
        check(wait_text("PIN tries 3"), "the card slot shows the card's PIN tries")
        shot("02-terminals")

        # Open a sale URL; the terminal panel beside the form takes the PIN.
        driver.get(base + "/console/#/open")
        wait.until(EC.presence_of_element_located((By.ID, "open-url")))
        url = ("vivapayclient://pay/v1?callback=mycallbackscheme://result&merchantKey=SG23323424EXS3&appId=com.example.myapp"
               "&action=sale&amount=1234&tipAmount=0&clientTransactionId=console-test-1")
        driver.find_element(By.ID, "open-url").send_keys(url)
        driver.find_element(By.CSS_SELECTOR, "form.card button[type=submit]").click()
        check(wait_text("Enter PIN"), "the terminal's screen asks for the PIN")
        check(wait_text("SALE 12.34 EUR"), "the terminal's screen shows the amount")
        shot("03-pin-prompt")
        pad = driver.find_element(By.CSS_SELECTOR, ".open-terminal .keypad")
        for digit in "1234":
            pad.find_element(By.CSS_SELECTOR, f"button[aria-label='{digit}']").click()
        check("••••" in driver.find_element(By.CSS_SELECTOR, ".open-terminal .entry").text, "the typed PIN shows as dots")
        pad.find_element(By.CSS_SELECTOR, "button[aria-label=OK]").click()
        check(wait_text("Transaction successful."), "the sale is approved")
        check(wait_text("APPROVED 00"), "the terminal's screen shows the approved outcome")
        body = text()
        check("mycallbackscheme://result?status=success" in body, "the callback URL is shown")
        check("accountNumber" in body and "476173******0010" in body, "the callback's fields are a table, the PAN masked")
        shot("04-open-approved")

        # A URL built from the form that the front refuses: the field and the rule are shown.
        sale_link = driver.find_element(By.PARTIAL_LINK_TEXT, "trace and cryptograms").get_attribute("href")
        driver.find_element(By.CSS_SELECTOR, "details.builder summary").click()
        Select(driver.find_element(By.ID, "open-front")).select_by_value("billpocket")
        driver.find_element(By.XPATH, "//button[contains(., 'Put the URL above')]").click()
        built = driver.find_element(By.ID, "open-url").get_attribute("value")
        check(built.startswith("billpocket://transaction=venta&") and "amount=100.00" in built and "userToken" not in built,
              f"the form builds a Billpocket URL, leaving empty fields out ({built[:60]}…)")
        driver.find_element(By.CSS_SELECTOR, "form.card button[type=submit]").click()
        # Billpocket answers a bad request with its error callback when it has somewhere to send it…
        check(wait_text("result=error") and "userToken" in text(), "Billpocket's error callback names the missing userToken")
        # …and with a refusal naming the field when it has not.
        scheme = driver.find_element(By.ID, "b-urlScheme")
        scheme.clear()
        driver.find_element(By.XPATH, "//button[contains(., 'Put the URL above')]").click()
        driver.find_element(By.CSS_SELECTOR, "form.card button[type=submit]").click()
        check(wait_text("Refused") and "Field urlScheme" in text(), "a refused URL shows its field and rule")
        driver.execute_script("document.querySelector('[role=alert]').scrollIntoView()")
        shot("04b-open-refused")

        # A tap on the other terminal: a small contactless sale needs no PIN.
        Select(driver.find_element(By.ID, "open-terminal")).select_by_value("bench2")
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, ".open-terminal article.terminal[data-terminal=bench2]")))
        slot = driver.find_element(By.CSS_SELECTOR, ".open-terminal article.terminal[data-terminal=bench2]")
        Select(slot.find_element(By.CSS_SELECTOR, "select[id$=-profile]")).select_by_value("visa-credit-fdda-go-online")
        slot.find_element(By.CSS_SELECTOR, "button[data-verb=tap]").click()
        check(wait_text("visa-credit-fdda-go-online (in the field)"), "the card slot shows the tapped card in the field")
        url_box = driver.find_element(By.ID, "open-url")
        url_box.clear()
        url_box.send_keys(url.replace("amount=1234", "amount=1500").replace("console-test-1", "console-test-tap"))
        driver.find_element(By.CSS_SELECTOR, "form.card button[type=submit]").click()
        check(wait_text("Transaction successful.") and "verificationMethod" in text(), "the tap is approved without a PIN")
        driver.find_element(By.PARTIAL_LINK_TEXT, "trace and cryptograms").click()
        check(wait_text("contactless (POS entry mode 07), kernel 3"), "the tap's transaction shows kernel 3 and entry mode 07")
        check("the PPSE (contactless directory)" in text(), "the tap's trace starts with SELECT PPSE")
        driver.get(sale_link)

        # The transaction: decoded trace, TLV names, bits, cryptograms.
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#txd-heading")))
        check(wait_text("APDU trace"), "the transaction page shows the trace")
        for detail in driver.find_elements(By.CSS_SELECTOR, "ol.trace details"):
            driver.execute_script("arguments[0].open = true", detail)
        body = text()
        for expected in ["GENERATE AC", "asks for ARQC", "READ RECORD", "record 1 of SFI 2", "Application Primary Account Number (PAN)",
                         "476173******0010", "Track 2 Equivalent Data", "PIN block withheld", "TVR (95)", "TSI (9B)",
                         "CVM Results (9F34)", "Plaintext PIN verification performed by ICC", "CVR (Visa)", "Visa CVN 10",
                         "verified the ARQC", "ARPC", "Normal processing"]:
            check(expected in body, f"the decoded trace shows {expected!r}")
        check("4761739001010010" not in driver.page_source, "the full PAN appears nowhere in the page")
        check("No attempt: it went in the app's reply." in body, "the callback is listed as a notification carried by the reply")
        shot("05-transaction")
        # Send the callback again: the attempt is recorded as a resend, saying why it went nowhere.
        driver.find_element(By.CSS_SELECTOR, "section.notification button.resend").click()
        check(wait_text("(resend)") and "callbacks.command" in text(), "Send again records a resend attempt with why it was not taken")
        driver.execute_script("document.querySelector('section.notification ol.attempts').scrollIntoView({block: 'center'})")
        shot("05b-notification-resent")
        # Save as scenario: the scenario and its card download; run beside each other they pass.
        driver.find_element(By.ID, "record").click()
        check(wait_text("Saved recorded-"), "Save as scenario reports the files it saved")
        recorded, card = None, None
        for _ in range(100):
            recorded = next(iter(glob.glob(str(downloads / "recorded-*.yaml"))), None)
            card = next(iter(glob.glob(str(downloads / "visa-credit-cvn10*.yaml"))), None)
            if recorded and card:
                break
            time.sleep(0.1)
        check(recorded is not None and card is not None, f"the scenario and its card profile download ({os.listdir(downloads)})")
        if recorded and card:
            folder = work / "recorded"
            (folder / "cards").mkdir(parents=True)
            shutil.copy(recorded, folder / "sale.yaml")
            shutil.copy(card, folder / "cards" / "visa-credit-cvn10.yaml")
            cardbench = os.path.join(os.path.dirname(os.path.abspath(args.cardbenchd)), "cardbench")
            run = subprocess.run([cardbench, "scenario", "run", str(folder / "sale.yaml"), "--in-process"], capture_output=True, text=True, timeout=120)
            check(run.returncode == 0, f"the saved scenario passes in process: {run.stdout[-400:]} {run.stderr[-400:]}")
        driver.execute_script("document.querySelector('section.recording').scrollIntoView({block: 'center'})")
        shot("05c-save-as-scenario")

        # The list, filtered.
        driver.get(base + "/console/#/transactions")
        check(wait_text("console-test") or wait_text("12.34 EUR"), "the transactions list shows the sale")
        Select(driver.find_element(By.ID, "f-status")).select_by_value("declined")
        driver.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
        check(wait_text("No transactions match."), "filtering by status declined leaves none")
        Select(driver.find_element(By.ID, "f-status")).select_by_value("approved")
        driver.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
        check(wait_text("12.34 EUR"), "filtering by status approved shows the sale")
        shot("06-transactions")

        # Host: queue a decline, see it queued.
        driver.get(base + "/console/#/host")
        check(wait_text("Amount tables in force"), "the host page shows the amount tables")
        check("stripe-cents" in text(), "the host page shows Viva's table")
        code = driver.find_element(By.ID, "q-bench1-code")
        code.send_keys("51")
        code.submit()
        check(wait_text("answer 51"), "a queued answer code is listed")
        shot("07-host")

        # Scenarios: run a folder, see its count, download the JUnit report.
        expected = len([f for f in glob.glob(os.path.join(args.scenarios, args.folder, "**", "*.yaml"), recursive=True)
                        if "/cards/" not in f])
        driver.get(base + "/console/#/scenarios")
        wait.until(EC.presence_of_element_located((By.ID, "sc-path")))
        Select(driver.find_element(By.ID, "sc-path")).select_by_value(args.folder)
        driver.find_element(By.CSS_SELECTOR, "form.card button[type=submit]").click()
        check(wait_text(f"{expected} of {expected} run: {expected} passed, 0 failed", timeout=240),
              f"the {args.folder} folder runs: {expected} of {expected} passed")
        check(len(driver.find_elements(By.CSS_SELECTOR, "ol.results li.pass")) == expected, "each scenario is listed as passed")
        driver.find_element(By.XPATH, "//button[contains(., 'JUnit')]").click()
        report = None
        for _ in range(100):
            found = [f for f in glob.glob(str(downloads / "scenarios-*.xml"))]
            if found:
                report = found[0]
                break
            time.sleep(0.1)
        check(report is not None, "the JUnit report downloads")
        if report:
            root = ET.parse(report).getroot()
            suite = root if root.tag == "testsuite" else root.find("testsuite")
            tests = int(suite.get("tests")) if suite is not None else -1
            check(tests == expected, f"the JUnit report counts {expected} tests (got {tests})")
        shot("08-scenarios")

        # Every control has a label; every button a name.
        unlabeled = []
        for page in ["#/scenarios", "#/terminals", "#/open", "#/transactions", "#/host", "#/transactions/1"]:
            driver.get(base + "/console/" + page)
            time.sleep(1)
            unlabeled += driver.execute_script(LABEL_CHECK)
        check(unlabeled == [], f"every control has a label and every button a name {unlabeled[:3]}")

        # Contrast (WCAG 2.1 AA): every visible text against the background it is drawn on, 4.5:1, or
        # 3:1 for large text; disabled controls are exempt, as WCAG says.
        low, checked = [], 0
        for page in ["#/terminals", "#/open", "#/transactions", "#/host", "#/scenarios", "#/transactions/1"]:
            driver.get(base + "/console/" + page)
            time.sleep(1.2)
            result = driver.execute_script(CONTRAST_CHECK)
            low += result["low"]
            checked += result["checked"]
        check(checked > 200 and low == [], f"every text of {checked} has a contrast of 4.5:1 (3:1 when large) or more {low[:4]}")
        # The same in the dark colour scheme.
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
        low, checked = [], 0
        for page in ["#/terminals", "#/transactions/1", "#/scenarios", "#/host"]:
            driver.get(base + "/console/" + page)
            time.sleep(1.2)
            result = driver.execute_script(CONTRAST_CHECK)
            low += result["low"]
            checked += result["checked"]
            if page == "#/transactions/1":
                shot("11-dark-transaction")
        check(checked > 100 and low == [], f"in the dark scheme too ({checked} texts) {low[:4]}")
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})

        # The keypad by keyboard: digits and Enter on a focused panel queue a PIN for the next prompt.
        driver.get(base + "/console/#/terminals")
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "article.terminal[data-terminal=bench2] .key")))
        key5 = driver.find_element(By.CSS_SELECTOR, "article.terminal[data-terminal=bench2] button[aria-label='5']")
        key5.send_keys("4321")
        check(driver.find_element(By.CSS_SELECTOR, "article.terminal[data-terminal=bench2] .entry").text == "••••",
              "digits typed with the keyboard go to the keypad")

        # An external terminal's ISO 8583 sale is a host-side transaction; its page lists both
        # messages field by field, the card number masked.
        listen = api(base, token, "/v1/host")["iso8583"]["listen"]
        answer = iso8583_sale(int(listen.rsplit(":", 1)[1]))
        check(answer.get("t") == "0210" and answer.get("11") == "000777", f"the issuer answers the 0200 with its 0210 ({answer})")
        rows = api(base, token, "/v1/transactions?provider=iso8583")
        check(len(rows) == 1, f"the 0200 is one host-side transaction ({len(rows)})")
        if rows:
            driver.get(base + f"/console/#/transactions/{rows[0]['id']}")
            check(wait_text("ISO 8583 messages (2)"), "the transaction's page lists its 2 ISO 8583 messages")
            check(wait_text("received 0200") and wait_text("sent 0210"), "the 0200 received and the 0210 sent, in order")
            driver.find_element(By.CSS_SELECTOR, "ol.trace li details summary").click()
            check(wait_text("476173******0010"), "the 0200's card number shows masked")
            check("4761739001010010" not in driver.page_source, "the full card number is nowhere in the page")
            shot("12-iso8583-transaction")

        # A phone-sized screen: one column, nothing wider than the screen.
        driver.set_window_size(390, 844)
        driver.get(base + "/console/#/terminals")
        wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "article.terminal")))
        time.sleep(0.5)
        overflow = driver.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        check(overflow <= 0, f"on a 390 px screen nothing scrolls sideways (overflow {overflow} px)")
        shot("09-phone-terminals")
        driver.get(base + "/console/#/open")
        time.sleep(0.5)
        shot("10-phone-open")
    finally:
        driver.quit()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        if FAILURES:
            print((work / "cardbenchd.log").read_text()[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    print(f"console: {len(FAILURES)} failure(s); screenshots in {shots}")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
