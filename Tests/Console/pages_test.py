#!/usr/bin/env python3
"""The platforms' consumer pages in a real browser: Debian's Chromium, headless, driven by Selenium
through Debian's chromedriver, against a real cardbenchd with its Worldline and Citcon listeners.

Usage: pages_test.py --cardbenchd PATH --screenshots DIR

Worldline: a hosted checkout's page is filled (a product the merchant excluded, then a card that is
challenged), its 3-D Secure page passed, the result page read and its link back checked; a second
checkout is cancelled; the hosted tokenization form is filled inside another page's iframe and the
token read back. Citcon: a wallet page approved and a card's 3-D Secure page failed. Every page's
controls have labels and its text enough contrast. Screenshots of each page go to the folder.
"""
import argparse
import json
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from console_test import CONTRAST_CHECK, FAILURES, LABEL_CHECK, browser, check  # noqa: E402

from selenium.common.exceptions import StaleElementReferenceException, TimeoutException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def start_daemon(binary, work):
    config = work / "cardbenchd.yaml"
    config.write_text("http:\n  port: 0\n  admin: true\ncallbacks:\n  allowed_hosts: []\n")
    log = open(work / "cardbenchd.log", "wb")
    proc = subprocess.Popen([binary, "--config", str(config), "--state-directory", str(work / "state"),
                             "--runtime-directory", str(work / "run"), "--worldline-port", "0", "--citcon-port", "0"],
                            stdout=log, stderr=subprocess.STDOUT)
    files = [work / "run" / n for n in ("http.port", "api.token", "worldline.port", "citcon.port")]
    for _ in range(300):
        if all(f.exists() and f.read_text().strip() for f in files):
            return proc, [f.read_text().strip() for f in files]
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    sys.exit("cardbenchd did not start:\n" + (work / "cardbenchd.log").read_text())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cardbenchd", required=True)
    parser.add_argument("--screenshots", required=True)
    args = parser.parse_args()
    shots = pathlib.Path(args.screenshots)
    shots.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="cardbench-pages-"))
    proc, (port, token, wl_port, cc_port) = start_daemon(args.cardbenchd, work)
    base = f"http://127.0.0.1:{port}"
    driver = browser(work)

    def api(method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(base + path, data=data, method=method,
                                         headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                return json.loads(reply.read())
        except urllib.error.HTTPError as e:
            raise AssertionError(f"{method} {path}: HTTP {e.code} {e.read()[:300]!r}") from None

    def worldline(method, path, body=None):
        answer = api("POST", "/v1/worldline/requests", {"method": method, "path": path, "body": json.dumps(body) if body else None})
        return answer["status"], answer["body"]

    def text():
        return driver.find_element(By.TAG_NAME, "body").text

    def wait_text(what, timeout=30):
        try:
            WebDriverWait(driver, timeout, ignored_exceptions=[StaleElementReferenceException]).until(
                lambda d: what in d.find_element(By.TAG_NAME, "body").text)
            return True
        except TimeoutException:
            return False

    def shot(name):
        driver.save_screenshot(str(shots / f"{name}.png"))

    def accessible(what):
        unlabelled = driver.execute_script(LABEL_CHECK)
        check(not unlabelled, f"{what}: every control has a label and every button a name {unlabelled}")
        contrast = driver.execute_script(CONTRAST_CHECK)
        check(not contrast["low"], f"{what}: every text of {contrast['checked']} has enough contrast {contrast['low']}")

    def fill(values):
        for name, value in values.items():
            field = driver.find_element(By.ID, name)
            field.clear()
            field.send_keys(value)

    try:
        # --- Worldline hosted checkout: Visa only, a Mastercard refused, then a challenged Visa.
        order = {"amountOfMoney": {"amount": 4250, "currencyCode": "EUR"}, "references": {"merchantReference": "pages-1"}}
        status, made = worldline("POST", "/v2/shop/hostedcheckouts", {
            "order": order, "cardPaymentMethodSpecificInput": {"authorizationMode": "SALE"},
            "hostedCheckoutSpecificInput": {"returnUrl": "https://shop.example/back", "locale": "en_GB",
                                            "paymentProductFilters": {"restrictTo": {"products": [1]}}}})
        check(status == 201 and made.get("redirectUrl", "").startswith(f"http://127.0.0.1:{wl_port}/hostedcheckout/"),
              f"a hosted checkout is made with its page on the Worldline listener ({status})")
        checkout_id = made["hostedCheckoutId"]
        driver.get(made["redirectUrl"])
        check(wait_text("Pay 42.50 EUR") and "pages-1" in text() and "Accepted: VISA" in text(), "the page shows the amount, the order and the products")
        accessible("the hosted checkout page")
        shot("20-hosted-checkout")
        fill({"cardNumber": "5413 3300 8960 4004", "expiryDate": "09/29", "cvv": "123", "cardholderName": "Ada Bench"})
        driver.find_element(By.ID, "submit").click()
        check(wait_text("MasterCard is not accepted"), "a product the merchant excluded is refused on the page")
        shot("21-hosted-checkout-not-eligible")
        fill({"cardNumber": "4874970686672022", "expiryDate": "12/31", "cvv": "123", "cardholderName": "Ada Bench"})
        driver.find_element(By.ID, "submit").click()
        check(wait_text("3-D Secure challenge") and "/threeds/" in driver.current_url, "a challenged card goes to the 3-D Secure page")
        accessible("the 3-D Secure page")
        shot("22-three-d-secure")
        driver.find_element(By.ID, "pass").click()
        check(wait_text("Thank you"), "the challenge passed, the result page thanks the consumer")
        back = driver.find_element(By.ID, "back").get_attribute("href")
        check(back == f"https://shop.example/back?hostedCheckoutId={checkout_id}&RETURNMAC={made['RETURNMAC']}",
              f"the link back carries hostedCheckoutId and RETURNMAC ({back})")
        accessible("the result page")
        shot("23-hosted-checkout-result")
        status, got = worldline("GET", f"/v2/shop/hostedcheckouts/{checkout_id}")
        check(got.get("status") == "PAYMENT_CREATED" and got["createdPaymentOutput"]["paymentStatusCategory"] == "SUCCESSFUL"
              and got["createdPaymentOutput"]["payment"]["status"] == "CAPTURED", f"the checkout shows the captured payment ({got.get('status')})")
        check("4874970686672022" not in driver.page_source, "the card number is not in the result page")

        # A second checkout, cancelled.
        status, other = worldline("POST", "/v2/shop/hostedcheckouts", {"order": order, "hostedCheckoutSpecificInput": {"returnUrl": "https://shop.example/back"}})
        driver.get(other["redirectUrl"])
        driver.find_element(By.ID, "cancel").click()
        check(wait_text("You cancelled the payment."), "Cancel ends the checkout")
        check(worldline("GET", f"/v2/shop/hostedcheckouts/{other['hostedCheckoutId']}")[1].get("status") == "CANCELLED_BY_CONSUMER",
              "the checkout is CANCELLED_BY_CONSUMER")

        # --- Worldline redirect method: PayPal's page, approved.
        status, made = worldline("POST", "/v2/shop/payments", {
            "order": order, "redirectPaymentMethodSpecificInput": {"paymentProductId": 840, "redirectionData": {"returnUrl": "https://shop.example/back"}}})
        redirect_url = made.get("merchantAction", {}).get("redirectData", {}).get("redirectURL", "")
        check(status == 201 and "/redirect/" in redirect_url, f"a PayPal payment redirects to its page ({status})")
        driver.get(redirect_url)
        check(wait_text("PayPal") and "42.50 EUR" in text(), "the PayPal page shows the amount")
        accessible("the redirect page")
        shot("27-redirect-paypal")
        driver.find_element(By.ID, "approve").click()
        time.sleep(0.5)
        check("shop.example/back" in driver.current_url and "RETURNMAC=" in driver.current_url, f"approved, the payer is back at the shop ({driver.current_url[:60]})")
        check(worldline("GET", f"/v2/shop/payments/{made['payment']['id']}")[1].get("status") == "CAPTURED", "the PayPal payment is CAPTURED")

        # --- Worldline hosted tokenization: the form in another page's iframe.
        status, tokenization = worldline("POST", "/v2/shop/hostedtokenizations", {"locale": "en_GB"})
        # The shop's own page, on a site of its own (another port): the form is framed cross-origin.
        shop = work / "shop"
        shop.mkdir()
        (shop / "card.html").write_text(
            f'<!doctype html><html lang="en"><title>Shop</title><h1>Your card</h1><iframe id="wl" title="card form" '
            f'src="{tokenization["hostedTokenizationUrl"]}" width="420" height="560"></iframe></html>')
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            shop_port = s.getsockname()[1]
        shop_server = subprocess.Popen([sys.executable, "-m", "http.server", str(shop_port), "--bind", "127.0.0.1"], cwd=shop,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)
        driver.get(f"http://127.0.0.1:{shop_port}/card.html")
        driver.switch_to.frame(driver.find_element(By.ID, "wl"))
        check(wait_text("Save the card"), "the tokenization form loads inside the shop's iframe")
        accessible("the tokenization form")
        fill({"cardNumber": "4761739001010010", "expiryDate": "12/31", "cvv": "123", "cardholderName": "Ada Bench"})
        driver.find_element(By.ID, "submit").click()
        check(wait_text("The card is saved"), "the form saves the card")
        driver.switch_to.default_content()
        shot("24-hosted-tokenization")
        shop_server.terminate()
        status, got = worldline("GET", f"/v2/shop/hostedtokenizations/{tokenization['hostedTokenizationId']}")
        check(got.get("tokenStatus") == "CREATED" and got.get("token", {}).get("card", {}).get("alias") == "************0010",
              f"the merchant reads the token the form made ({got.get('tokenStatus')})")

        # --- Citcon: a wallet page approved, a card's 3-D Secure page failed.
        api("POST", "/v1/citcon/merchants", {"merchantId": "pages"})
        urls = {"success": "https://shop.example/ok", "fail": "https://shop.example/fail", "cancel": "https://shop.example/cancel"}

        def citcon(body):
            answer = api("POST", "/v1/citcon/requests", {"merchantId": "pages", "method": "POST", "path": "/v1/charges", "body": json.dumps(body)})
            found = []

            def walk(v):
                if isinstance(v, dict):
                    for x in v.values():
                        walk(x)
                elif isinstance(v, list):
                    for x in v:
                        walk(x)
                elif isinstance(v, str) and v.startswith("http") and "/citcon/" in v:
                    found.append(v)
            walk(answer["body"])
            return answer, found

        answer, pages = citcon({"transaction": {"reference": "pages-w", "amount": 1999, "currency": "USD", "country": "US"},
                                "payment": {"method": "paypal"}, "urls": urls})
        wallet = next((u for u in pages if "/citcon/wallet/" in u), None)
        check(wallet is not None, f"a wallet charge gives its wallet page ({answer['status']})")
        if wallet:
            driver.get(wallet)
            check(wait_text("Approve"), "the wallet page offers Approve")
            accessible("the Citcon wallet page")
            shot("25-citcon-wallet")
            driver.find_element(By.XPATH, "//button[contains(., 'Approve')]").click()
            time.sleep(0.5)
            check(driver.current_url.startswith("https://shop.example/ok") or "shop.example/ok" in driver.current_url,
                  f"approved, the payer goes to urls.success ({driver.current_url[:60]})")
        answer, pages = citcon({"transaction": {"reference": "pages-3ds", "amount": 2500, "currency": "USD", "country": "US"},
                                "payment": {"method": "card", "request_3ds": True,
                                            "data": {"pan": "4761739001010010", "expiry": "12/31", "cvv": "123"}}, "urls": urls})
        challenge = next((u for u in pages if "/citcon/3ds/" in u), None)
        check(challenge is not None, f"a 3-D Secure card charge gives its challenge page ({answer['status']})")
        if challenge:
            driver.get(challenge)
            check(wait_text("Fail") or wait_text("fail"), "the 3-D Secure page offers Fail")
            accessible("the Citcon 3-D Secure page")
            shot("26-citcon-three-d-secure")
            buttons = [b for b in driver.find_elements(By.TAG_NAME, "button") if "fail" in b.text.lower()]
            buttons[0].click()
            time.sleep(0.5)
            check("shop.example/fail" in driver.current_url, f"failed, the payer goes to urls.fail ({driver.current_url[:60]})")
        # --- The console: a Citcon charge's chargeback played from its transaction's page.
        answer = api("POST", "/v1/citcon/requests", {"merchantId": "pages", "method": "POST", "path": "/v1/charges", "body": json.dumps({
            "transaction": {"reference": "pages-cb", "amount": 2000, "currency": "USD", "country": "US", "auto_capture": True},
            "payment": {"method": "card", "data": {"pan": "4761739001010010", "expiry": "12/31", "cvv": "123"}}, "urls": urls})})
        charge_id = answer["body"]["data"]["id"]
        row = api("GET", f"/v1/citcon/charges/{charge_id}")["transactions"][0]["id"]
        driver.get(base + f"/console/#token={token}")
        time.sleep(0.5)
        driver.get(base + f"/console/#/transactions/{row}")
        check(wait_text("Open a chargeback"), "a captured Citcon charge's page offers a chargeback")
        fill({"cb-amount": "500", "cb-reason": "not received"})
        driver.find_element(By.ID, "cb-open").click()
        check(wait_text("not received") and "opened" in text(), "the chargeback is opened and listed")
        driver.find_element(By.ID, "cb-lost").click()
        check(wait_text("lost"), "the chargeback is lost")
        accessible("the chargebacks section")
        driver.execute_script("document.querySelector('section.chargebacks').scrollIntoView({block: 'center'})")
        shot("28-console-chargeback")
        record = api("GET", f"/v1/citcon/charges/{charge_id}")
        check([t["action"] for t in record["transactions"]] == ["sale", "refund"], f"the lost chargeback is a refund row ({record['transactions']})")
    finally:
        driver.quit()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()

    print(f"pages: {len(FAILURES)} failure(s); screenshots in {shots}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
