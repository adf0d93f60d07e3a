#!/usr/bin/env python3
"""The Islet console in a real browser: headless Chromium (Debian's chromium and chromium-driver) driven by
Selenium, against a real `islet serve --apns simulator` with its demo application.

    console_browser.py BASE_URL SCREENSHOT_DIRECTORY

Signs in (a wrong token first), watches a start made through the JSON API appear in the activity list without a
reload (Server-Sent Events), composes an update from the schema's form, previews it (dry run, byte size), sends it
and sees the simulated iPhone's lock screen change; a POST without the CSRF token is refused; every page is
screenshotted (desktop, phone width, dark) and each screenshot is checked not to be blank. Exits 0 when all held;
every wait has a deadline.
"""
import json
import os
import re
import struct
import sys
import urllib.error
import urllib.request
import zlib

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

BASE, SHOTS = sys.argv[1].rstrip("/"), sys.argv[2]
TOKEN, APPLICATION = "SECRET_API_TOKEN", "XXXXX-XXXXX"
WAIT = 20
os.makedirs(SHOTS, exist_ok=True)
checks = []


def check(condition, what):
    checks.append(what)
    if not condition:
        raise AssertionError(what)


def api(method, request):
    """A JSON API call, as a backend makes it (not through the console)."""
    body = json.dumps({"request": dict(request, application=APPLICATION, auth=TOKEN)}).encode()
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{BASE}/json/1.3/{method}", data=body, method="POST"), timeout=WAIT) as answer:
            envelope = json.load(answer)
    except urllib.error.HTTPError as refusal:
        raise AssertionError(f"{method} was refused: {refusal.read().decode()}")
    assert envelope["status_code"] == 200, envelope
    return envelope["response"]


def png_pixels(data):
    """Width, height and rows of RGB(A) pixels of an 8-bit, non-interlaced PNG (what Chromium writes)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, chunks, header = 8, [], None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        payload = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", payload)
        elif kind == b"IDAT":
            chunks.append(payload)
        position += 12 + length
    width, height, depth, color, _, _, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unexpected PNG format {header}"
    channels = 3 if color == 2 else 4
    raw, stride, rows, previous = zlib.decompress(b"".join(chunks)), width * channels, [], bytearray(width * channels)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, corner = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 255
            elif kind == 2:
                line[x] = (line[x] + up) & 255
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 255
        rows.append(bytes(line))
        previous = line
    return width, height, channels, rows


def screenshot(driver, name):
    """Saves the page as NAME.png and checks it is not blank: many colours, and a good share of pixels off the background."""
    path = os.path.join(SHOTS, name + ".png")
    data = driver.get_screenshot_as_png()
    with open(path, "wb") as file:
        file.write(data)
    width, height, channels, rows = png_pixels(data)
    counts = {}
    for row in rows[::4]:
        for x in range(0, width * channels, channels * 4):
            pixel = row[x:x + 3]
            counts[pixel] = counts.get(pixel, 0) + 1
    total, background = sum(counts.values()), max(counts.values())
    check(len(counts) >= 8 and (total - background) / total >= 0.02,
          f"screenshot {name}.png ({width}x{height}) is not blank: {len(counts)} colours, {100 * (total - background) / total:.1f}% off the background")
    return path


def wait_for(driver, condition, what, timeout=WAIT):
    # Live pages re-render when the server says something changed: an element found a moment ago may be gone.
    try:
        return WebDriverWait(driver, timeout, ignored_exceptions=[StaleElementReferenceException]).until(lambda d: condition(d))
    except TimeoutException:
        raise AssertionError(f"timed out after {timeout} s waiting for: {what}")


def click(driver, by, value, what):
    """Clicks the element, finding it again if a live refresh replaced it meanwhile."""
    def clicked(d):
        elements = d.find_elements(by, value)
        if not elements:
            return False
        elements[0].click()
        return True
    wait_for(driver, clicked, what)


def text_of(driver, selector):
    for _ in range(20):
        try:
            return " ".join(element.text for element in driver.find_elements(By.CSS_SELECTOR, selector))
        except StaleElementReferenceException:
            continue   # re-rendered between finding and reading: read the new one
    raise AssertionError(f"{selector} kept being replaced while read")


def unlabelled_controls(driver):
    """Form controls on the page without a label (label[for], a wrapping label, or aria-label)."""
    return driver.execute_script("""
        return [...document.querySelectorAll('input, select, textarea')].filter((control) => {
            if (control.type === 'hidden' || control.closest('[hidden]')) return false;
            if (control.getAttribute('aria-label') || control.closest('label')) return false;
            return !(control.id && document.querySelector('label[for="' + CSS.escape(control.id) + '"]'));
        }).map((control) => control.outerHTML.slice(0, 80));""")


def main():
    api("setLiveActivitySchema", {"attributes_type": "FoodDeliveryAttributes",
                                  "content_state": {"status": "string", "estimatedTime": "string", "emoji": "string?"}, "attributes": {}})
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000", "--disable-gpu",
                     "--no-first-run", "--disable-extensions", "--disable-background-networking", "--lang=en-US"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(WAIT)
    driver.set_script_timeout(WAIT)
    try:
        run(driver)
        # The refusals this test provokes (a wrong token, the first look for a session, the forged POST) are logged as failed loads.
        expected = ("status of 401", "status of 403")
        problems = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE" and not any(e in entry["message"] for e in expected)]
        check(not problems, f"no errors in the browser's console (script errors, Content-Security-Policy violations): {problems}")
    finally:
        driver.quit()
    print("\n".join("ok - " + what for what in checks))
    print(f"console browser tests: all {len(checks)} checks held; screenshots in {SHOTS}")


def run(driver):
    # A wrong token is refused, and the form says why.
    driver.get(BASE + "/console")
    wait_for(driver, lambda d: d.find_element(By.ID, "sign-in").is_displayed(), "the sign-in form")
    check(not unlabelled_controls(driver), "every control of the sign-in form has a label")
    # Issue 44: a server API token is not offered to the browser's password manager; the console password is.
    autocomplete = lambda: driver.find_element(By.ID, "secret").get_attribute("autocomplete")
    check(autocomplete() == "off", f"the token field asks the browser not to save it: {autocomplete()}")
    driver.find_element(By.CSS_SELECTOR, "input[name=credential][value=password]").click()
    check(autocomplete() == "current-password", f"the password field may be saved: {autocomplete()}")
    driver.find_element(By.CSS_SELECTOR, "input[name=credential][value=token]").click()
    check(autocomplete() == "off", f"back to the token: {autocomplete()}")
    driver.find_element(By.ID, "secret").send_keys("not-a-real-token" + Keys.ENTER)
    wait_for(driver, lambda d: "not a valid server API token" in d.find_element(By.ID, "sign-in-error").text, "the refusal of a wrong token")
    check(driver.find_element(By.ID, "top").get_attribute("hidden") is not None, "a wrong token does not sign in")
    check(driver.get_cookie("islet_console") is None, "a wrong token gets no session cookie")
    screenshot(driver, "01-sign-in-refused")

    # Signed in with the demo's server API token: the overview.
    secret = driver.find_element(By.ID, "secret")
    secret.clear()
    secret.send_keys(TOKEN + Keys.ENTER)
    wait_for(driver, lambda d: d.find_element(By.ID, "top").is_displayed(), "the console after signing in")
    cookie = driver.get_cookie("islet_console")
    check(cookie is not None and cookie["httpOnly"] and cookie.get("sameSite") == "Strict", f"the session cookie is HttpOnly and SameSite=Strict: {cookie}")
    check(driver.execute_script("return document.cookie.includes('islet_console')") is False, "scripts cannot read the session cookie")
    wait_for(driver, lambda d: "devices" in text_of(d, ".stat"), "the overview's figures")
    check("2" in text_of(driver, ".stat"), "the overview counts the demo's two devices")
    check(driver.find_elements(By.CSS_SELECTOR, ".chart svg"), "the overview has its chart of pushes")
    screenshot(driver, "02-overview")

    # The activity list, live: a start made through the JSON API appears without a reload.
    driver.get(BASE + "/console#/activities")
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".live.on"), "the live indicator (the event stream is open)")
    driver.execute_script("window.notReloaded = true")
    api("startLiveActivity", {"notifications": [{
        "title": "Food Delivery", "content": "Your order is being prepared", "apns_priority": 10, "filter": "FILTER_NAME_1",
        "live_activity_id": "ORDER_42",
        "live_activity": {"event": "start", "title": "Order 42", "attributes-type": "FoodDeliveryAttributes", "attributes": {},
                          "content-state": {"status": "Preparing", "estimatedTime": "30 min", "emoji": "👨‍🍳"}}}]})
    wait_for(driver, lambda d: d.find_elements(By.LINK_TEXT, "ORDER_42"), "ORDER_42 to appear in the list by itself")
    check(driver.execute_script("return window.notReloaded === true"), "the list changed without reloading the page (Server-Sent Events)")
    screenshot(driver, "03-activities")

    # The activity's page: the lock-screen preview, its messages and devices.
    click(driver, By.LINK_TEXT, "ORDER_42", "the link to ORDER_42")
    wait_for(driver, lambda d: "Preparing" in text_of(d, ".la-card"), "the lock-screen preview of ORDER_42")
    wait_for(driver, lambda d: "first_third" in text_of(d, "table"), "the per-device delivery table")
    check("Order 42" in text_of(driver, ".la-card"), "the preview shows the activity's title")
    wait_for(driver, lambda d: "Your order is being prepared" in text_of(d, ".phone.android .lu-card"), "the Android Live Update's preview beside it")
    check("Food Delivery" in text_of(driver, ".phone.android .lu-card"), "the Live Update shows the start's title")
    screenshot(driver, "04-activity")

    # Compose an update from the schema's form; the dry run shows the exact request and its size.
    click(driver, By.LINK_TEXT, "Update", "the Update button")
    wait_for(driver, lambda d: d.find_elements(By.ID, "content-state-status"), "the content-state form built from the schema")
    check(driver.find_element(By.ID, "content-state-emoji") is not None, "the optional schema field has its input too")
    check(not unlabelled_controls(driver), f"every control of the compose form has a label: {unlabelled_controls(driver)}")
    status = driver.find_element(By.ID, "content-state-status")
    check(status.get_attribute("value") == "Preparing", "the form starts from the activity's current content-state")
    status.clear()
    status.send_keys("On its way")
    eta = driver.find_element(By.ID, "content-state-estimatedTime")
    eta.clear()
    eta.send_keys("10 min")
    wait_for(driver, lambda d: "Audience: 3 devices" in d.find_element(By.ID, "compose-audience").text, "the live audience count")
    driver.find_element(By.ID, "compose-dry-run").click()
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#compose-preview .bytes"), "the dry run's preview")
    sizes = [element.text for element in driver.find_elements(By.CSS_SELECTOR, "#compose-preview .bytes")]
    check(all("bytes of payload" in size and any(c.isdigit() for c in size) for size in sizes), f"the dry run shows each request's byte size: {sizes}")
    check("On its way" in text_of(driver, "#compose-preview pre"), "the dry run shows the payload as it will be sent")
    check("/json/1.3/updateLiveActivity" in driver.find_element(By.ID, "compose-curl").text, "the equivalent curl command is shown")
    screenshot(driver, "05-compose-dry-run")
    phone_before = api("getLiveActivity", {"live_activity_id": "ORDER_42"})["live_activity"]["content_state"]
    check(phone_before["status"] == "Preparing", "a dry run changes nothing")
    driver.find_element(By.ID, "compose-send-button").click()
    wait_for(driver, lambda d: "Accepted as" in d.find_element(By.ID, "compose-preview").text, "the update to be accepted")

    # The simulated iPhones' lock screens change.
    driver.get(BASE + "/console#/simulator")
    wait_for(driver, lambda d: "On its way" in text_of(d, '.phone[data-hwid="first_third"] .la-card'), "first_third's lock screen to show the update")
    check("10 min" in text_of(driver, '.phone[data-hwid="first_third"] .la-card'), "the lock screen shows the new estimate")
    wait_for(driver, lambda d: "ORDER_42" in text_of(d, '.phone[data-hwid="android_phone"] .lu-card'), "android_phone's shade to show the Live Update")
    check("Your order is being prepared" in text_of(driver, '.phone[data-hwid="android_phone"] .lu-card'),
          "the Live Update keeps the start's text through an update that gave none")
    screenshot(driver, "06-simulator")

    # A state-changing call without the CSRF token is refused, even with the session cookie.
    refused = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/console/api/call/updateLiveActivity', {method: 'POST', credentials: 'same-origin', headers: {'Content-Type': 'application/json'},
            body: JSON.stringify({request: {notifications: [{live_activity_id: 'ORDER_42',
                live_activity: {event: 'update', 'content-state': {status: 'Forged', estimatedTime: '0 min'}}}]}})})
          .then(async (r) => done({status: r.status, body: await r.json()}), (e) => done({status: 0, body: String(e)}));""")
    check(refused["status"] == 403 and "X-CSRF-Token" in refused["body"]["status_message"], f"a POST without the CSRF token is refused: {refused}")
    check(api("getLiveActivity", {"live_activity_id": "ORDER_42"})["live_activity"]["content_state"]["status"] == "On its way",
          "the refused POST changed nothing")

    # The other pages.
    driver.get(BASE + "/console#/devices?q=first_third")
    wait_for(driver, lambda d: "Device first_third" in text_of(d, "#device-detail"), "the device's tokens and tags")
    check("push-to-start" in text_of(driver, "#device-detail"), "the device shows its push-to-start token with its age")
    screenshot(driver, "07-devices")
    for page, marker in (("filters", "FILTER_NAME_1"), ("schemas", "FoodDeliveryAttributes"), ("channels", "New channel")):
        driver.get(f"{BASE}/console#/{page}")
        wait_for(driver, lambda d: marker in d.find_element(By.ID, "page").text, f"the {page} page")
        check(not unlabelled_controls(driver), f"every control of the {page} page has a label")
        screenshot(driver, f"08-{page}")
    driver.get(BASE + "/console#/compose")
    wait_for(driver, lambda d: d.find_elements(By.ID, "content-state-status"), "the start form")
    Select(driver.find_element(By.ID, "compose-target")).select_by_value("users")
    check(driver.find_element(By.ID, "compose-list").is_displayed(), "targeting by users shows the list")
    screenshot(driver, "09-compose-start")

    # Keyboard: the first Tab reaches the skip link, and focus is visible.
    driver.get(BASE + "/console#/overview")
    wait_for(driver, lambda d: "devices" in text_of(d, ".stat"), "the overview again")
    # ORDER_42 is the one live activity now: its count reads in the singular (issue 48), the two devices' in the plural.
    tiles = [(e.find_element(By.CSS_SELECTOR, ".value").text, e.find_element(By.CSS_SELECTOR, ".label").text)
             for e in driver.find_elements(By.CSS_SELECTOR, ".stat")]
    check(("1", "live activity") in tiles and ("3", "devices") in tiles, f"a count of one in the singular, of three in the plural: {tiles}")
    # The chart's scales, as shown (issue 48): the top of the scale is the legend's peak (ORDER_42's start made one), with
    # its unit and base, and the time axis spans the hour. Read in one script: the overview re-renders every 10 s.
    y_axis, x_axis, legend = driver.execute_script("""
        const texts = (selector) => [...document.querySelectorAll(selector)].map((e) => e.innerText.trim());
        return [texts('.chart .y-axis span'), texts('.chart .x-axis span'), texts('.chart .legend span').join(' ')];""")
    peak = re.search(r"peak ([0-9,]+) a minute", legend)
    check(peak is not None and peak.group(1) != "0" and y_axis == [peak.group(1), "pushes/min", "0"],
          f"the chart's y-axis shows its top (the peak), unit and base: {y_axis}, legend {legend!r}")
    check(x_axis == ["60 min ago", "now"], f"the chart's time axis spans the last hour: {x_axis}")
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    focused = driver.switch_to.active_element
    check(focused.get_attribute("class") == "skip", "the first Tab focuses the skip link")
    outline = driver.execute_script("return getComputedStyle(document.activeElement).outlineStyle")
    check(outline not in ("none", ""), f"the focused element has a visible outline ({outline})")

    driver.execute_script("document.activeElement.blur()")

    # The Pushwoosh SDK's DefaultLiveActivityAttributes keep everything under "data": the preview shows the fields
    # inside it (nested ones as parent.child), not one opaque "data" (issue 45).
    api("setLiveActivitySchema", {"attributes_type": "DefaultLiveActivityAttributes",
                                  "content_state": {"data": {"status": "string", "courier": {"name": "string"}}}, "attributes": {"data": "object"}})
    api("startLiveActivity", {"notifications": [{
        "title": "Food Delivery", "content": "Packed", "devices": ["first_third"], "live_activity_id": "ORDER_DEFAULT",
        "live_activity": {"attributes-type": "DefaultLiveActivityAttributes", "attributes": {"data": {"shop": "Bakery"}},
                          "content-state": {"data": {"status": "Packed", "courier": {"name": "Rui"}}}}}]})
    driver.get(BASE + "/console#/activity/ORDER_DEFAULT")
    wait_for(driver, lambda d: "Packed" in text_of(d, ".la-card"), "the preview of the default attributes' activity")
    card = text_of(driver, ".la-card")
    check("status" in card and "courier.name" in card and "Rui" in card and '{"' not in card, "the fields inside data: %r" % card)
    driver.get(BASE + "/console#/simulator")
    phone = '.phone[data-hwid="first_third"] .la-card'
    wait_for(driver, lambda d: "courier.name" in text_of(d, phone), "the simulated iPhone's card of the default attributes' activity")
    check('{"' not in text_of(driver, phone), "the simulated lock screen shows the fields inside data: %r" % text_of(driver, phone))
    driver.get(BASE + "/console#/activity/ORDER_DEFAULT")
    wait_for(driver, lambda d: "Packed" in text_of(d, ".la-card"), "the activity's page again")
    # A schema of its fields makes the update form one input per field inside data, not a JSON box.
    click(driver, By.LINK_TEXT, "Update", "the Update button of ORDER_DEFAULT")
    wait_for(driver, lambda d: d.find_elements(By.ID, "content-state-data-courier-name"), "inputs for the fields inside data")
    check(driver.find_element(By.ID, "content-state-data-status").get_attribute("value") == "Packed", "the nested input starts from the current state")
    check(not unlabelled_controls(driver), f"every control of the nested form has a label: {unlabelled_controls(driver)}")

    # A phone's width: nothing wider than the screen.
    driver.set_window_size(375, 812)
    driver.get(BASE + "/console#/activity/ORDER_42")
    wait_for(driver, lambda d: "On its way" in text_of(d, ".la-card"), "the activity at 375 px")
    overflow = driver.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
    check(overflow <= 0, f"at 375 px the page does not scroll sideways ({overflow} px too wide)")
    screenshot(driver, "10-activity-phone-width")

    # Dark.
    driver.set_window_size(1280, 1000)
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]})
    driver.get(BASE + "/console#/activity/ORDER_42")
    wait_for(driver, lambda d: "On its way" in text_of(d, ".la-card"), "the activity in dark mode")
    background = driver.execute_script("return getComputedStyle(document.body).backgroundColor")
    check(background not in ("rgb(246, 247, 249)", "rgb(255, 255, 255)"), f"dark mode darkens the page ({background})")
    screenshot(driver, "11-activity-dark")
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "light"}]})

    # Sign out: the session is gone on the server too.
    driver.get(BASE + "/console#/overview")
    wait_for(driver, lambda d: d.find_element(By.ID, "sign-out").is_displayed(), "the sign-out button")
    click(driver, By.ID, "sign-out", "the sign-out button")
    wait_for(driver, lambda d: d.find_element(By.ID, "sign-in").is_displayed(), "the sign-in form after signing out")
    status = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch('/console/api/overview', {credentials: 'same-origin'}).then((r) => done(r.status), () => done(0));""")
    check(status == 401, f"after signing out the console's API answers 401 ({status})")


if __name__ == "__main__":
    try:
        main()
    except Exception as failure:
        print("\n".join("ok - " + what for what in checks[:-1]))
        print(f"not ok - {type(failure).__name__}: {str(failure).splitlines()[0] if str(failure) else ''}")
        sys.exit(1)
