"""The console in a real browser: Debian's Chromium driven by chromium-driver through selenium, with axe-core
(axe-selenium-python) judging every page. Run by scripts/lib/console-check.sh against a console over the demo's data.

Environment: CONSOLE_URL, REPORT_JSON (`payrecon report --format json` of the same data), SHOTS (a directory),
VIEWER, OPERATOR (name:password each). Prints one line per step; exits 1 at the first failure."""
import collections
import decimal
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

from axe_selenium_python import Axe
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

BASE = os.environ["CONSOLE_URL"].rstrip("/")
REPORT = json.load(open(os.environ["REPORT_JSON"], encoding="utf-8"))
SHOTS = os.environ["SHOTS"]
VIEWER = os.environ["VIEWER"].split(":", 1)
OPERATOR = os.environ["OPERATOR"].split(":", 1)
passed = 0
axe_figures = []


def settle(driver, ready, what):
    """Waits (at most 10 s) until `ready(driver)`: a click's navigation has landed. `what` (text, or a function
    making it) says what failed."""
    try:
        WebDriverWait(driver, 10).until(ready)
    except Exception:
        fail(f"{what() if callable(what) else what} (at {driver.current_url})")


def ok(what):
    global passed
    passed += 1
    print(f"ok   {what}", flush=True)


def fail(what):
    print(f"FAIL {what}", flush=True)
    sys.exit(1)


def browser():
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"]:
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def sign_in(driver, who):
    driver.delete_all_cookies()
    driver.get(BASE + "/login")
    driver.find_element(By.ID, "name").send_keys(who[0])
    driver.find_element(By.ID, "password").send_keys(who[1])
    driver.find_element(By.CSS_SELECTOR, "form.signin button[type=submit]").click()
    settle(driver, lambda d: d.current_url.rstrip("/") == BASE and d.find_elements(By.ID, "open"),
           # Read only when it failed: read now, the page the click is leaving would be gone under it.
           lambda: f"signing in as {who[0]} did not reach the overview: "
           + re.sub(r"\s+", " ", driver.find_element(By.TAG_NAME, "body").text)[:300])


def audit(driver, page):
    """axe-core on the page as it is: no serious or critical violation."""
    axe = Axe(driver)
    axe.inject()
    results = axe.run()
    bad = [v for v in results["violations"] if v.get("impact") in ("serious", "critical")]
    axe_figures.append((page, len(results["violations"]), len(bad), len(results["passes"])))
    if bad:
        fail(f"axe finds {len(bad)} serious or critical violation(s) on {page}: "
             + "; ".join(f"{v['id']} ({v['impact']}): {v['help']}" for v in bad))


def shoot(driver, name):
    for width in (1400, 800):
        driver.set_window_size(width, 1000)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(width, max(1000, min(height, 4000)))
        driver.save_screenshot(os.path.join(SHOTS, f"console-{name}-{width}.png"))
        overflow = driver.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if overflow > 1:
            fail(f"{name} at {width} px is {overflow} px wider than the window")
    driver.set_window_size(1400, 1000)


def session_cookie(driver):
    cookie = driver.get_cookie("payrecon_console")
    return f"payrecon_console={cookie['value']}" if cookie else ""


def post(path, fields, cookie):
    """A crafted POST outside the browser: (status, body)."""
    data = urllib.parse.urlencode(fields).encode()
    request = urllib.request.Request(BASE + path, data=data, method="POST",
                                     headers={"Cookie": cookie, "Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


urllib.request.install_opener(urllib.request.build_opener(NoRedirect))
driver = browser()
try:
    driver.get(BASE + "/login")
    audit(driver, "sign-in")
    # 1. A viewer: the overview's figures are the report's, and nothing can be written.
    sign_in(driver, VIEWER)
    summary = REPORT["summary"]
    shown_open = int(driver.find_element(By.ID, "open").text)
    if shown_open != summary["open"]:
        fail(f"the overview shows {shown_open} open, the report {summary['open']}")
    shown_money = {e.get_attribute("data-currency"): e.text for e in driver.find_elements(By.CSS_SELECTOR, "#at-risk [data-currency]")}
    wanted_money = {code: f"{amount} {code}" for code, amount in summary["amount_at_risk"].items() if amount not in ("0", "0.00")}
    if shown_money != wanted_money:
        fail(f"the overview's money at risk {shown_money} is not the report's {wanted_money}")
    shown_kinds = {e.get_attribute("data-kind"): int(e.text) for e in driver.find_elements(By.CSS_SELECTOR, "[data-kind]")}
    if shown_kinds != summary["by_kind"]:
        fail(f"the overview's kinds {shown_kinds} are not the report's {summary['by_kind']}")
    ok(f"viewer: the overview equals report --format json ({shown_open} open, {len(shown_kinds)} kinds, {shown_money})")
    shoot(driver, "overview")
    audit(driver, "overview")

    driver.get(BASE + "/discrepancies")
    shoot(driver, "discrepancies")
    audit(driver, "discrepancies")
    # The one to acknowledge: money at risk, on an order with no other open finding (an order's money counts once,
    # so acknowledging it takes exactly its amount out of the total).
    rows = [r for r in REPORT["discrepancies"] if r["status"] == "open"]
    per_order = collections.Counter((r["provider"], r.get("order_id")) for r in rows)
    target = next((r for r in rows if r.get("order_id") and r.get("amount_at_risk") not in (None, "0", "0.00")
                   and per_order[(r["provider"], r["order_id"])] == 1), None)
    if target is None:
        fail("the demo's data has no order with one open discrepancy holding money")
    discrepancy = str(target["id"])
    driver.find_element(By.ID, "f-q").send_keys(target["order_id"])
    driver.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
    settle(driver, lambda d: "q=" in d.current_url, "the search did not load")
    listed = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "#discrepancies tbody tr td:first-child a")]
    if discrepancy not in listed:
        fail(f"searching for order {target['order_id']} does not list discrepancy {discrepancy} ({listed})")
    driver.find_element(By.LINK_TEXT, discrepancy).click()
    settle(driver, lambda d: d.current_url.endswith(f"/discrepancies/{discrepancy}"), f"discrepancy {discrepancy} did not open")
    if driver.find_elements(By.CSS_SELECTOR, "form.ack"):
        fail("a viewer is shown the acknowledge form")
    csrf = driver.find_element(By.CSS_SELECTOR, "input[name=csrf]").get_attribute("value")
    status, _ = post(f"/discrepancies/{discrepancy}/ack", {"csrf": csrf, "note": "viewer"}, session_cookie(driver))
    if status != 403:
        fail(f"a viewer's crafted acknowledge was answered {status}, not 403")
    ok(f"viewer: no acknowledge form on discrepancy {discrepancy}; a crafted POST is 403")

    driver.get(BASE + "/actions?status=failed")
    failed = [a.text for a in driver.find_elements(By.CSS_SELECTOR, "#actions tbody tr td:first-child a")]
    if not failed:
        fail("the demo's data lists no failed action (PayPal refused a capture for want of the permission)")
    action = failed[0]
    driver.find_element(By.LINK_TEXT, action).click()
    settle(driver, lambda d: d.current_url.endswith(f"/actions/{action}"), f"action {action} did not open")
    if driver.find_elements(By.CSS_SELECTOR, f"form[action='/actions/{action}/retry']"):
        fail("a viewer is shown the retry form")
    status, _ = post(f"/actions/{action}/retry", {"csrf": csrf}, session_cookie(driver))
    if status != 403:
        fail(f"a viewer's crafted retry was answered {status}, not 403")
    ok(f"viewer: no retry form on failed action {action}; a crafted POST is 403")

    # 2. An operator opens a discrepancy, unfolds its evidence, acknowledges it with a note, and sees it leave the
    # open set and the money at risk.
    sign_in(driver, OPERATOR)
    driver.get(BASE + f"/discrepancies/{discrepancy}")
    details = driver.find_element(By.CSS_SELECTOR, "details.evidence")
    if details.get_attribute("open") is not None:
        fail("the evidence is unfolded before it is asked for")
    details.find_element(By.TAG_NAME, "summary").click()
    timeline = details.find_element(By.CSS_SELECTOR, "pre.timeline")
    if not timeline.is_displayed() or "check" not in timeline.text:
        fail("the evidence did not unfold into its timeline")
    shoot(driver, "discrepancy")
    audit(driver, "discrepancy")
    cookie, csrf = session_cookie(driver), driver.find_element(By.CSS_SELECTOR, "form.ack input[name=csrf]").get_attribute("value")
    status, _ = post(f"/discrepancies/{discrepancy}/ack", {"note": "no token"}, cookie)
    if status != 403:
        fail(f"an acknowledge without the CSRF token was answered {status}, not 403")
    ok("a POST without the CSRF token is 403")
    driver.find_element(By.ID, "note").send_keys("refunded by hand, ticket 42")
    driver.find_element(By.CSS_SELECTOR, "form.ack button[type=submit]").click()
    settle(driver, lambda d: not d.find_elements(By.CSS_SELECTOR, "form.ack"), "the acknowledge did not land")
    if "Acknowledged by " + OPERATOR[0] not in driver.page_source or "refunded by hand, ticket 42" not in driver.page_source:
        fail("the acknowledged discrepancy does not say who acknowledged it and why: " + driver.current_url + " " + re.sub(r"\s+", " ", driver.find_element(By.TAG_NAME, "main").text)[:600])
    driver.get(BASE + "/")
    after_open = int(driver.find_element(By.ID, "open").text)
    if after_open != shown_open - 1:
        fail(f"after the acknowledge the overview shows {after_open} open, not {shown_open - 1}")
    code = target["currency"]
    before = decimal.Decimal(summary["amount_at_risk"][code])
    wanted = before - decimal.Decimal(target["amount_at_risk"])
    money = {e.get_attribute("data-currency"): e.text for e in driver.find_elements(By.CSS_SELECTOR, "#at-risk [data-currency]")}
    now = decimal.Decimal(money[code].split()[0]) if code in money else decimal.Decimal(0)
    if now != wanted:
        fail(f"after the acknowledge {code} at risk is {now}, not {before} - {target['amount_at_risk']} = {wanted}")
    driver.get(BASE + "/discrepancies?status=open")
    if any(a.text == discrepancy for a in driver.find_elements(By.CSS_SELECTOR, "#discrepancies tbody tr td:first-child a")):
        fail(f"discrepancy {discrepancy} is still listed open")
    ok(f"operator: discrepancy {discrepancy} acknowledged with a note; open {shown_open} -> {after_open}, {code} at risk {before} -> {now}")

    # 2b. An operator retries the failed action: re-planned from a fresh fetch at the provider. PayPal answers a
    # repeated key with its first answer, so the refused capture is superseded and the order's capture is planned
    # again under a key of its own, for the same amount.
    driver.get(BASE + "/actions?status=failed")
    shoot(driver, "actions")
    audit(driver, "actions")
    driver.get(BASE + f"/actions/{action}")
    facts = driver.find_element(By.CSS_SELECTOR, "dl.facts").text
    details = driver.find_elements(By.CSS_SELECTOR, "details.call")
    if not details:
        fail(f"action {action} shows no call")
    details[0].find_element(By.TAG_NAME, "summary").click()
    if "403" not in details[0].text:
        fail(f"action {action}'s call does not show PayPal's 403: {details[0].text[:300]}")
    shoot(driver, "action")
    audit(driver, "action")
    order_link = driver.find_element(By.CSS_SELECTOR, "dl.facts a").get_attribute("href")
    amount = re.search(r"Amount\s+([0-9.]+ [A-Z]{3})", facts)
    driver.find_element(By.CSS_SELECTOR, f"form[action='/actions/{action}/retry'] button[type=submit]").click()
    settle(driver, lambda d: d.find_elements(By.ID, "audit"), f"the retry of action {action} did not land")
    trail = driver.find_element(By.ID, "audit").text
    if f"{OPERATOR[0]} retry" not in trail:
        fail(f"the retry is not in the action's trail: {trail}")
    driver.get(order_link)
    rows = [r.text for r in driver.find_elements(By.CSS_SELECTOR, "#order-actions tbody tr")]
    if not amount or not any("pending" in r and amount.group(1) in r for r in rows):
        fail(f"after the retry the order has no pending action for {amount.group(1) if amount else '?'}: {rows}")
    shoot(driver, "order")
    audit(driver, "order")
    ok(f"operator: failed action {action} retried ({trail.splitlines()[-1][:120]}); the order has a pending {amount.group(1)} again")

    # The other pages: each renders over the demo's data and passes axe.
    for path, name, what in (("/deliveries", "deliveries", "#deliveries tbody tr"), ("/rejections", "rejections", "#rejections tbody tr"),
                             ("/settlement", "settlement", "#settlement-files tbody tr")):
        driver.get(BASE + path)
        if not driver.find_elements(By.CSS_SELECTOR, what):
            fail(f"{path} lists nothing over the demo's data")
        audit(driver, name)
    driver.get(BASE + "/deliveries")
    driver.find_element(By.CSS_SELECTOR, "#deliveries tbody tr td:first-child a").click()
    settle(driver, lambda d: "/deliveries/" in d.current_url, "a delivery did not open")
    audit(driver, "delivery")
    driver.get(BASE + "/rejections")
    driver.find_element(By.CSS_SELECTOR, "#rejections tbody tr td:first-child a").click()
    settle(driver, lambda d: "/rejections/" in d.current_url, "a rejection did not open")
    audit(driver, "rejection")
    body_url = driver.find_element(By.LINK_TEXT, "body").get_attribute("href")
    request = urllib.request.Request(body_url, headers={"Cookie": session_cookie(driver)})
    with urllib.request.urlopen(request) as answer:
        if "attachment" not in (answer.headers.get("Content-Disposition") or ""):
            fail(f"{body_url} is not a download")
    ok("deliveries, rejections (with the body to download for verify) and settlement render and pass axe")

    # 2c. The overview refreshes by itself: another acknowledgement (here a crafted POST, as from another browser)
    # notifies the console, whose overview page fetches its figures again without being reloaded.
    driver.get(BASE + "/")
    before_open = int(driver.find_element(By.ID, "open").text)
    if driver.execute_script("return document.scripts.length") != 1:
        fail("the overview does not load its refresh script")
    other = next(r for r in REPORT["discrepancies"] if r["status"] == "open" and str(r["id"]) != discrepancy)
    csrf = driver.find_element(By.CSS_SELECTOR, "nav input[name=csrf]").get_attribute("value")
    status, _ = post(f"/discrepancies/{other['id']}/ack", {"csrf": csrf, "note": "from another browser"}, session_cookie(driver))
    if status != 303:
        fail(f"acknowledging discrepancy {other['id']} was answered {status}")
    try:
        WebDriverWait(driver, 25).until(lambda d: d.find_element(By.ID, "open").text == str(before_open - 1))
    except Exception:
        fail(f"the overview did not refresh by itself to {before_open - 1} open (it shows {driver.find_element(By.ID, 'open').text})")
    if not driver.current_url.rstrip("/") == BASE:
        fail("the overview navigated instead of refreshing in place")
    ok(f"the overview refreshed by itself after another acknowledgement: {before_open} -> {before_open - 1} open")

    # 3. A provider string holding <script> shows as text.
    driver.get(BASE + "/discrepancies?status=all&q=TX-SCRIPT")
    driver.find_element(By.CSS_SELECTOR, "#discrepancies tbody tr td:first-child a").click()
    settle(driver, lambda d: "/discrepancies/" in d.current_url and "?" not in d.current_url, "the <script> discrepancy did not open")
    if driver.execute_script("return document.scripts.length") != 0 or "<script>alert(1)</script>" not in driver.find_element(By.TAG_NAME, "main").text:
        fail("a provider's <script> was not shown as text")
    ok("a provider string holding <script> shows as text, and the page has no script")

    # 4. A wrong password, repeated, is limited.
    statuses = [post("/login", {"name": "mallory", "password": "guess %d" % i}, "")[0] for i in range(6)]
    if statuses[:5] != [401] * 5 or statuses[5] != 429:
        fail(f"six wrong passwords were answered {statuses}, not five 401 then 429")
    ok("a wrong password, repeated, is rate-limited (401 x5, then 429)")
finally:
    driver.quit()

for page, violations, bad, passes in axe_figures:
    print(f"axe  {page}: {passes} rules pass, {violations} violation(s), {bad} serious or critical")
print(f"console-check: {passed} passed")
