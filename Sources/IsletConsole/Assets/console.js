// Islet console: one page, routes in the URL's hash, data from /console/api (the JSON API's own methods run
// for the signed-in session, a few console reads, and Server-Sent Events). No framework, no build step: the
// DOM is built with `h()`, and text from the server is only ever set as text, never parsed as HTML.
"use strict";

const state = { session: null, application: null, events: null, onChange: null, page: null, refreshEvery: 2000, lastRefresh: 0 };

// MARK: - Helpers

function h(tag, attributes, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else if (key === "class") element.className = value;
    else if (value === true) element.setAttribute(key, "");
    else element.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

function badge(text) { return h("span", { class: "badge " + String(text || "").replace(/[^a-z-]/g, "") }, text || "—"); }

function toast(text) {
  const element = document.getElementById("toast");
  element.textContent = text;
  element.classList.add("show");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => element.classList.remove("show"), 3500);
}

function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "long" });
}

function age(iso) {
  if (!iso) return "—";
  const seconds = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (seconds < 90) return Math.round(seconds) + " s";
  if (seconds < 5400) return Math.round(seconds / 60) + " min";
  if (seconds < 172800) return Math.round(seconds / 3600) + " h";
  return Math.round(seconds / 86400) + " d";
}

function table(headers, rows, caption) {
  return h("div", { class: "table-wrap" },
    h("table", { class: headers ? null : "facts" },
      caption ? h("caption", { class: "visually-hidden" }, caption) : null,
      headers ? h("thead", {}, h("tr", {}, headers.map((header) => h("th", { scope: "col", class: header.num ? "num" : null }, typeof header === "string" ? header : header.label)))) : null,
      h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: headers ? headers.length : 2, class: "muted" }, "Nothing yet.")))));
}

// A table of label → value rows.
function facts(pairs, caption) {
  return table(null, pairs.map(([label, value]) => h("tr", {}, h("th", { scope: "row" }, label), h("td", { class: typeof value === "number" ? "num" : null },
    typeof value === "number" ? value.toLocaleString() : value))), caption);
}

class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// Every console call: the session cookie goes by itself; changes carry the CSRF token.
async function api(path, options = {}) {
  const headers = { "Accept": "application/json" };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  if (options.method && options.method !== "GET") headers["X-CSRF-Token"] = state.session ? state.session.csrf_token : "";
  if (state.application) headers["X-Islet-Application"] = state.application;
  const response = await fetch("/console/api/" + path, {
    method: options.method || "GET", headers, credentials: "same-origin",
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  let envelope = null;
  try { envelope = await response.json(); } catch (error) { envelope = null; }
  if (!response.ok || !envelope || envelope.status_code !== 200) {
    const message = envelope && envelope.status_message ? envelope.status_message : "HTTP " + response.status;
    if (response.status === 401 && path !== "session") { showSignIn(message); }
    throw new APIError(response.status, message);
  }
  return envelope.response;
}

// A JSON API method, exactly as POST /json/1.3/<method> runs it for this application.
function call(method, request) { return api("call/" + method, { method: "POST", body: { request } }); }

function query(parameters) {
  const search = new URLSearchParams();
  for (const [key, value] of Object.entries(parameters)) if (value !== undefined && value !== null && value !== "") search.set(key, value);
  const text = search.toString();
  return text ? "?" + text : "";
}

function route() {
  const hash = location.hash.replace(/^#\/?/, "");
  const [path, search] = hash.split("?");
  const decode = (part) => { try { return decodeURIComponent(part); } catch (error) { return part; } };
  const parts = path.split("/").map(decode);
  return { name: parts[0] || "overview", argument: parts.slice(1).join("/"), parameters: new URLSearchParams(search || "") };
}

function link(path, text) { return h("a", { href: "#/" + path }, text); }

// MARK: - Sign-in and session

function showSignIn(message) {
  closeEvents();
  clearTimeout(openEvents.timer);
  openEvents.timer = null;
  state.onChange = null;
  state.session = null;
  document.getElementById("top").hidden = true;
  document.getElementById("page").replaceChildren();
  document.getElementById("sign-in").hidden = false;
  document.getElementById("sign-in-error").textContent = message && !/not signed in/.test(message) ? message : "";
  document.getElementById("secret").focus();
}

function signedIn(session) {
  state.session = session;
  const select = document.getElementById("application-select");
  const remembered = sessionStorage.getItem("islet.application");
  const codes = session.applications.map((application) => application.code);
  state.application = codes.includes(remembered) ? remembered : codes[0] || null;
  select.replaceChildren(...session.applications.map((application) =>
    h("option", { value: application.code, selected: application.code === state.application }, application.name + " (" + application.code + ")")));
  select.disabled = session.applications.length < 2;
  document.getElementById("nav-simulator").hidden = !session.simulator;
  document.getElementById("sign-in").hidden = true;
  document.getElementById("top").hidden = false;
  openEvents();
  render();
}

function setUpChrome() {
  document.getElementById("sign-in-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const kind = new FormData(event.target).get("credential");
    const secret = document.getElementById("secret").value;
    const error = document.getElementById("sign-in-error");
    error.textContent = "";
    try {
      const session = await api("session", { method: "POST", body: kind === "password" ? { password: secret } : { token: secret } });
      document.getElementById("secret").value = "";
      signedIn(session);
    } catch (failure) {
      error.textContent = failure.message;
    }
  });
  for (const radio of document.querySelectorAll("input[name=credential]")) {
    radio.addEventListener("change", () => {
      const password = radio.value === "password" && radio.checked;
      document.getElementById("secret-label").textContent = password ? "Console password" : "Server API token";
      // A server API token is a credential of the application, not a password of the person: browsers are not asked
      // to save it. The console password may be.
      document.getElementById("secret").setAttribute("autocomplete", password ? "current-password" : "off");
    });
  }
  document.getElementById("sign-out").addEventListener("click", async () => {
    try { await api("session", { method: "DELETE" }); } catch (error) { /* signed out either way */ }
    showSignIn("");
  });
  document.getElementById("application-select").addEventListener("change", (event) => {
    state.application = event.target.value;
    sessionStorage.setItem("islet.application", state.application);
    openEvents();
    render();
  });
  window.addEventListener("hashchange", () => {
    if (location.hash && !location.hash.startsWith("#/")) return;   // the skip link, not a page
    render().then(() => { const title = document.getElementById("page-title"); if (title) title.focus({ preventScroll: true }); });
  });
  document.querySelector(".skip").addEventListener("click", (event) => {
    event.preventDefault();
    document.getElementById("main").focus();
  });
}

// MARK: - Live updates (Server-Sent Events)

function openEvents() {
  closeEvents();
  if (!state.application) return;
  const source = new EventSource("/console/api/events" + query({ application: state.application }));
  source.addEventListener("ready", () => {
    setLive(true);
    // Back after a gap (a restart, a proxy hiccup): what changed meanwhile was not told, so look again.
    if (openEvents.lost && state.onChange) state.onChange();
    openEvents.lost = false;
    openEvents.backoff = 3000;
  });
  source.addEventListener("change", () => {
    // A burst of changes refreshes the page once, and a page refreshes at most once every `refreshEvery`
    // milliseconds (the overview's hour of pushes is the costliest read).
    if (openEvents.timer) return;
    const wait = Math.max(150, (state.lastRefresh || 0) + state.refreshEvery - Date.now());
    openEvents.timer = setTimeout(() => {
      openEvents.timer = null;
      state.lastRefresh = Date.now();
      if (state.onChange) state.onChange();
    }, wait);
  });
  source.addEventListener("error", () => {
    setLive(false);
    openEvents.lost = true;
    // The browser retries a dropped connection itself, but gives up on an answer other than 200 (a proxy's 502
    // while the server restarts): then the console opens a new stream, if still signed in, backing off to 30 s.
    if (source.readyState !== EventSource.CLOSED || state.events !== source) return;
    const wait = openEvents.backoff || 3000;
    openEvents.backoff = Math.min(30000, wait * 2);
    setTimeout(async () => {
      if (state.events !== source || !state.session) return;
      try { await api("session"); openEvents(); } catch (error) { if (error.status !== 401) { state.events = source; source.dispatchEvent(new Event("error")); } }
    }, wait);
  });
  state.events = source;
}

function closeEvents() {
  if (state.events) state.events.close();
  state.events = null;
}

function setLive(on) {
  for (const element of document.querySelectorAll(".live")) {
    element.classList.toggle("on", on);
    element.textContent = on ? "live" : "reconnecting…";
  }
}

function liveBadge() { return h("span", { class: "live" + (state.events && state.events.readyState === 1 ? " on" : "") }, "live"); }

// MARK: - Pages

const pages = {};

async function render() {
  if (!state.session) return;
  const current = route();
  for (const anchor of document.querySelectorAll("#nav a")) {
    const target = anchor.getAttribute("href").slice(2);
    anchor.toggleAttribute("aria-current", target === current.name || (target === "activities" && current.name === "activity"));
    if (anchor.hasAttribute("aria-current")) anchor.setAttribute("aria-current", "page");
  }
  state.onChange = null;
  const container = document.getElementById("page");
  const page = pages[current.name] || pages.overview;
  const token = Symbol("page");
  state.page = token;
  try {
    const content = await page(current);
    if (state.page !== token) return;
    container.replaceChildren(content);
    document.title = (content.dataset.title || "Console") + " · Islet";
  } catch (error) {
    if (state.page !== token || error.status === 401) return;
    container.replaceChildren(h("div", { class: "panel" }, h("h1", {}, "Something went wrong"), h("p", { class: "error", role: "alert" }, error.message)));
  }
}

function pageElement(title, ...children) {
  const element = h("section", { "aria-labelledby": "page-title" }, h("h1", { id: "page-title", tabindex: "-1" }, title), ...children);
  element.dataset.title = title;
  return element;
}

// Shows what `build` makes, now and on change events while the page shows (at most once every `every`
// milliseconds). Once the reader has opened more (another page of a list, counts, a log: `extend()`), a change
// no longer replaces it; a button offers the fresh view instead. Focus stays on the control with the same id.
function refreshing(build, every = 2000) {
  state.refreshEvery = every;
  const holder = h("div", {});
  const fresh = h("button", { type: "button", class: "quiet", hidden: true }, "Changes arrived: show them");
  const token = state.page;
  let extended = false;
  const update = async (asked) => {
    if (extended && asked !== true) { fresh.hidden = false; return; }
    try {
      const content = await build();
      if (state.page !== token) return;
      // Unchanged content stays as it is: nothing moves under the reader's pointer or focus.
      if (holder.firstChild && holder.firstChild.isEqualNode(content)) return;
      const focused = holder.contains(document.activeElement) ? document.activeElement.id : "";
      holder.replaceChildren(content);
      extended = false;
      fresh.hidden = true;
      if (focused) { const again = document.getElementById(focused); if (again) again.focus(); }
    } catch (error) {
      holder.replaceChildren(h("p", { class: "error", role: "alert" }, error.message));
    }
  };
  fresh.addEventListener("click", () => update(true));
  state.onChange = update;
  return { holder: h("div", {}, fresh, holder), update, extend: () => { extended = true; } };
}

// A "more" button for a paged list: fetches the next page with `next(cursor)`, appends its rows, and stops at the end.
function moreButton(label, cursor, next, extend) {
  const button = h("button", { type: "button", class: "quiet", hidden: !cursor }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      cursor = await next(cursor);
      if (extend) extend();
      button.hidden = !cursor;
    } catch (error) {
      toast(error.message);
    } finally {
      button.disabled = false;
    }
  });
  return button;
}

pages.overview = async () => {
  const { holder, update } = refreshing(async () => {
    const overview = await api("overview");
    // A count and what it counts, in the singular for one: "1 live activity", "2 live activities".
    const stat = (label, value, one = label) => h("div", { class: "stat" }, h("div", { class: "value" }, Number(value).toLocaleString()),
      h("div", { class: "label" }, Number(value) === 1 ? one : label));
    const reasons = {};
    for (const minute of overview.pushes) if (minute.state === "failed") reasons[minute.reason || "(no reason)"] = (reasons[minute.reason || "(no reason)"] || 0) + minute.count;
    return h("div", {},
      h("div", { class: "grid" },
        stat("devices", overview.devices, "device"), stat("push-to-start tokens", overview.push_to_start_tokens, "push-to-start token"),
        stat("live activities", overview.activities.active, "live activity"), stat("scheduled", overview.activities.scheduled),
        stat("ended", overview.activities.ended)),
      h("h2", {}, "Pushes per minute, last hour ", liveBadge()),
      h("div", { class: "panel chart" }, chart(overview)),
      h("div", { class: "split" },
        h("div", {}, h("h2", {}, "Failures by APNs reason"),
          table(["reason", { label: "pushes", num: true }], Object.entries(reasons).sort((a, b) => b[1] - a[1]).map(([reason, count]) =>
            h("tr", {}, h("td", {}, h("code", {}, reason)), h("td", { class: "num" }, count.toLocaleString()))), "Failures by APNs reason")),
        h("div", {}, h("h2", {}, "Delivery queue (whole server)"),
          facts([
            ["jobs due now", overview.queue.jobs_due], ["scheduled", overview.queue.jobs_scheduled], ["retries owed", overview.queue.retrying],
            ["starts awaiting their token", overview.queue.unconfirmed], ["lag (oldest due), seconds", overview.queue.lag_seconds],
          ], "Delivery queue"))));
  }, 10000);
  await update();
  return pageElement("Overview", holder);
};

// Pushes a minute as stacked bars (SVG): sent, failed, and the rest (skipped, superseded, retrying…).
function chart(overview) {
  const span = 60;   // minutes: the server's window (an hour before now), a bar for each minute it touches
  const start = Math.floor(new Date(overview.window_start).getTime() / 60000);
  const minutes = Array.from({ length: span + 1 }, () => ({ sent: 0, failed: 0, other: 0 }));
  for (const entry of overview.pushes) {
    const index = Math.floor(new Date(entry.minute).getTime() / 60000) - start;
    if (index < 0 || index > span) continue;
    const key = entry.state === "sent" ? "sent" : entry.state === "failed" ? "failed" : "other";
    minutes[index][key] += entry.count;
  }
  const peak = Math.max(0, ...minutes.map((m) => m.sent + m.failed + m.other));
  const highest = Math.max(1, peak);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 610 180");
  // Stretched to the panel's width, so the time axis under it lines up with the first and last bars.
  svg.setAttribute("preserveAspectRatio", "none");
  svg.setAttribute("role", "img");
  const total = minutes.reduce((sum, m) => sum + m.sent + m.failed + m.other, 0);
  const title = document.createElementNS(ns, "title");
  title.textContent = total.toLocaleString() + " pushes in the last hour; at most " + peak.toLocaleString() + " in a minute";
  svg.append(title);
  minutes.forEach((minute, index) => {
    let y = 170;
    for (const [key, color] of [["sent", "var(--chart-sent)"], ["failed", "var(--chart-failed)"], ["other", "var(--chart-other)"]]) {
      if (!minute[key]) continue;
      const height = Math.max(1, (minute[key] / highest) * 160);
      y -= height;
      const bar = document.createElementNS(ns, "rect");
      bar.setAttribute("x", index * 10 + 1); bar.setAttribute("y", y); bar.setAttribute("width", 8); bar.setAttribute("height", height);
      bar.style.fill = color;   // CSSOM, which the console's Content-Security-Policy allows (a style attribute it does not)
      svg.append(bar);
    }
  });
  const axis = document.createElementNS(ns, "line");
  axis.setAttribute("x1", 0); axis.setAttribute("x2", 610); axis.setAttribute("y1", 170.5); axis.setAttribute("y2", 170.5);
  axis.style.stroke = "var(--line)";
  svg.append(axis);
  const legend = h("div", { class: "legend" },
    h("span", {}, h("span", { class: "swatch", "data-color": "sent" }), "sent"),
    h("span", {}, h("span", { class: "swatch", "data-color": "failed" }), "failed"),
    h("span", {}, h("span", { class: "swatch", "data-color": "other" }), "skipped, superseded, retrying"),
    h("span", {}, total.toLocaleString() + " in the hour, peak " + peak.toLocaleString() + " a minute"));
  for (const swatch of legend.querySelectorAll(".swatch")) swatch.style.background = "var(--chart-" + swatch.dataset.color + ")";
  // The scales, as text beside the bars: the top of the bars' scale with its unit, and the span they cover.
  const yAxis = h("div", { class: "y-axis" }, h("span", {}, highest.toLocaleString()), h("span", {}, "pushes/min"), h("span", {}, "0"));
  const xAxis = h("div", { class: "x-axis" }, h("span", {}, span + " min ago"), h("span", {}, "now"));
  return h("div", {}, h("div", { class: "plot" }, yAxis, svg, h("span", {}), xAxis), legend);
}

pages.activities = async (current) => {
  const filters = { state: current.parameters.get("state") || "", attributes_type: current.parameters.get("attributes_type") || "" };
  const form = h("form", { class: "row panel", role: "search", onsubmit: (event) => {
    event.preventDefault();
    const data = new FormData(event.target);
    location.hash = "#/activities" + query({ state: data.get("state"), attributes_type: data.get("attributes_type") });
  } },
    h("div", {}, h("label", { for: "filter-state" }, "State"),
      h("select", { id: "filter-state", name: "state" }, ["", "active", "scheduled", "ended"].map((value) =>
        h("option", { value, selected: value === filters.state }, value || "any")))),
    h("div", {}, h("label", { for: "filter-type" }, "Attributes type"),
      h("input", { id: "filter-type", name: "attributes_type", type: "text", value: filters.attributes_type, placeholder: "any" })),
    h("div", {}, h("button", { type: "submit" }, "Filter")));
  const rowsOf = (activities) => activities.map((activity) => h("tr", {},
    h("td", {}, link("activity/" + encodeURIComponent(activity.live_activity_id), activity.live_activity_id)),
    h("td", {}, badge(activity.state)), h("td", {}, activity.attributes_type || "—"), h("td", {}, activity.name || "—"),
    h("td", { class: "num" }, activity.devices.toLocaleString() + (activity.devices_capped ? "+" : "")),
    h("td", {}, when(activity.updated_at))));
  const { holder, update, extend } = refreshing(async () => {
    const first = await api("activities" + query(filters));
    const body = table(["live activity", "state", "attributes type", "name", { label: "devices", num: true }, "updated"], rowsOf(first.activities), "Activities");
    const more = moreButton("Load more", first.next_cursor, async (cursor) => {
      const next = await api("activities" + query({ ...filters, cursor }));
      body.querySelector("tbody").append(...rowsOf(next.activities));
      return next.next_cursor;
    }, () => extend());
    return h("div", {}, body, h("p", {}, more));
  });
  await update();
  return pageElement("Activities", form, h("p", {}, liveBadge(), " The list refreshes itself when an activity starts, changes or ends."), holder);
};

// A generic Live Activity card on a lock screen: title, the content-state's fields, stale or ended, the dismissal countdown.
// The fields a lock screen shows of a content-state: nested objects as "parent.child", and the Pushwoosh SDK's
// DefaultLiveActivityAttributes (everything under "data") as the fields inside "data" (issue 45).
function contentFields(content) {
  const source = content || {};
  const keys = Object.keys(source);
  const data = keys.length === 1 && keys[0] === "data" && source.data && typeof source.data === "object" && !Array.isArray(source.data);
  const fields = [];
  const walk = (object, prefix) => {
    for (const [key, value] of Object.entries(object)) {
      if (value && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length > 0) walk(value, prefix + key + ".");
      else fields.push([prefix + key, value]);
    }
  };
  walk(data ? source.data : source, "");
  return fields;
}

function liveActivityCard(activity, latest) {
  const stale = latest && latest["stale-date"] && latest["stale-date"] * 1000 <= Date.now();
  const flags = [];
  if (activity.ended) flags.push(h("span", { class: "flag ended" }, "Ended"));
  if (stale || activity.stale) flags.push(h("span", { class: "flag stale" }, "Stale"));
  if (activity.waiting) flags.push(h("span", { class: "flag waiting" }, "Waiting for unlock"));
  const fields = contentFields(activity.content);
  const card = h("div", { class: "la-card" + (activity.ended ? " ended" : ""), role: "group", "aria-label": "Live Activity " + activity.id },
    h("div", { class: "la-head" }, h("span", {}, activity.app || "App"), h("span", {}, flags)),
    h("div", { class: "la-title" }, activity.title || activity.id),
    fields.length ? h("dl", {}, fields.map(([key, value]) => [h("dt", {}, key), h("dd", {}, typeof value === "object" ? JSON.stringify(value) : String(value))]))
      : h("p", {}, "No content yet."));
  if (activity.dismissAt) {
    const countdown = h("p", { class: "la-head" });
    const tick = () => {
      const left = Math.max(0, Math.round((new Date(activity.dismissAt).getTime() - Date.now()) / 1000));
      countdown.textContent = left > 0 ? "Leaves the lock screen in " + Math.floor(left / 3600) + " h " + Math.floor((left % 3600) / 60) + " min " + (left % 60) + " s"
        : "Dismissed";
    };
    tick();
    const timer = setInterval(() => { if (!countdown.isConnected) clearInterval(timer); else tick(); }, 1000);
    card.append(countdown);
  }
  return card;
}

// An Android Live Update as the Pushwoosh SDK draws it on the notification shade (issue 46): title, text, and the
// progress bar of its segments (each its color, as long as its length) with the progress over them.
function liveUpdateCard(update, app) {
  const segments = Array.isArray(update.segments) ? update.segments : [];
  const total = segments.reduce((sum, segment) => sum + Math.max(1, Number(segment.length) || 1), 0);
  const bar = update.progress_bar === false ? null : update.progress_indeterminate
    ? h("div", { class: "lu-bar indeterminate", role: "progressbar", "aria-label": "progress, indeterminate" })
    : h("div", { class: "lu-bar", role: "progressbar", "aria-label": "progress", "aria-valuenow": String(update.progress ?? 0),
                 "aria-valuemax": String(total || 100) },
        segments.map((segment) => h("span", { style: "flex:" + Math.max(1, Number(segment.length) || 1) + ";background:" + (/^#[0-9A-Fa-f]{6,8}$/.test(segment.color) ? segment.color : "#888") })),
        h("span", { class: "lu-done", style: "width:" + Math.min(100, Math.round(100 * (update.progress ?? 0) / (total || 100))) + "%" }));
  return h("div", { class: "lu-card", role: "group", "aria-label": "Live Update " + update.id },
    h("div", { class: "lu-head" }, h("span", {}, app || "App"), h("span", {}, update.id)),
    h("div", { class: "lu-title" }, update.title || app || "App"),
    update.text ? h("div", {}, update.text) : null, bar);
}

function shadeFrame(title, ...cards) {
  return h("div", { class: "phone android" },
    h("div", { class: "status" }, h("span", {}, title), h("span", {}, "▲ 5G")),
    cards.length ? cards : h("p", { class: "empty" }, "No Live Update on the notification shade."));
}

function phoneFrame(title, ...cards) {
  const now = new Date();
  return h("div", { class: "phone" },
    h("div", { class: "status" }, h("span", {}, title), h("span", {}, "●●● 5G")),
    h("div", { class: "clock", "aria-hidden": "true" }, now.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" })),
    cards.length ? cards : h("p", { class: "empty" }, "No Live Activity on the lock screen."));
}

pages.activity = async (current) => {
  const id = current.argument;
  const { holder, update, extend } = refreshing(async () => {
    const [answer, timeline] = await Promise.all([call("getLiveActivity", { live_activity_id: id, limit: 50 }),
                                                  api("messages" + query({ live_activity_id: id, limit: 20 }))]);
    const activity = answer.live_activity;
    const latest = timeline.messages[0];
    const application = state.session.applications.find((app) => app.code === state.application);
    const iPhone = phoneFrame("iPhone", liveActivityCard({
      id: activity.live_activity_id, app: application ? application.name : "", title: activity.name || activity.attributes_type,
      content: activity.content_state, ended: activity.state === "ended", dismissAt: activity.dismiss_at,
    }, latest));
    // Beside it, the Android Live Update of its latest message that has one (issue 46); an end takes it off the shade.
    const androidMessage = timeline.messages.find((message) => message.android);
    const live = androidMessage && androidMessage.android.live;
    const preview = h("div", { class: "previews" }, iPhone, androidMessage ? shadeFrame("Android",
      ...(live && live.op === "OPERATION_END" ? [] : [liveUpdateCard({ id: activity.live_activity_id, title: androidMessage.android.title,
        text: androidMessage.android.text, ...(live || {}) }, application ? application.name : "")])) : null);
    const summary = facts([
      ["state", badge(activity.state)], ["attributes type", activity.attributes_type || "—"], ["started", when(activity.started_at)],
      ["iOS ends it by", when(activity.ends_by)], ["leaves the lock screen", when(activity.dismiss_at)], ["renews", when(activity.renews_at)],
      ["updated", when(activity.updated_at)], ["devices", activity.device_count],
      // Phones whose start's answer was lost: not among the devices until their app reports a token.
      ...(activity.unconfirmed_starts.count > 0 ? [["unconfirmed starts", activity.unconfirmed_starts.count
        + ", next try " + when(activity.unconfirmed_starts.next_attempt_at)]] : []),
    ], "Activity");
    const actions = activity.state === "ended" ? null : h("p", { class: "row" },
      h("a", { class: "button", href: "#/compose" + query({ event: "update", live_activity_id: id }) }, "Update"),
      h("a", { class: "button quiet", href: "#/compose" + query({ event: "end", live_activity_id: id }) }, "End"));
    const messageRows = (messages) => messages.map((message) => {
      const details = h("td", {}, h("button", { type: "button", class: "quiet", "aria-label": "counts of message " + message.code, onclick: async (event) => {
        const cell = event.target.parentElement;
        try {
          const shown = (await call("getMessageDetails", { message: message.code })).message;
          const counts = Object.entries(shown.counts).filter(([, value]) => typeof value === "number" && value > 0).map(([key, value]) => key + " " + value);
          cell.replaceChildren(h("span", {}, badge(shown.status), " ", counts.join(", ") || "no pushes"));
          extend();
        } catch (error) { toast(error.message); }
      } }, "counts"));
      return h("tr", {}, h("td", {}, when(message.send_at)), h("td", {}, message.event), h("td", {}, badge(message.state)),
        h("td", {}, h("code", {}, message.code)), h("td", {}, h("code", {}, JSON.stringify(message["content-state"] || {}))), details);
    });
    const deviceRows = (devices) => devices.map((device) => h("tr", {},
      h("td", {}, link("devices" + query({ q: device.hwid }), device.hwid)), h("td", {}, badge(device.state)), h("td", {}, badge(device.last_delivery),
        device.next_attempt_at ? " next try " + when(device.next_attempt_at) : ""),
      h("td", {}, device.last_status === null ? "—" : String(device.last_status)), h("td", {}, device.last_reason || "—"),
      h("td", { class: "num" }, device.attempts === null ? "—" : String(device.attempts)), h("td", {}, age(device.token_updated_at)),
      h("td", {}, device.flags.map((flag) => flag.code).join(", ") || "—")));
    const devices = table(["device", "state", "last delivery", "APNs status", "APNs reason", { label: "attempts", num: true }, "token age", "flags"],
      deviceRows(activity.devices), "Devices");
    const more = moreButton("More devices", activity.next_cursor, async (cursor) => {
      const next = (await call("getLiveActivity", { live_activity_id: id, limit: 50, cursor })).live_activity;
      devices.querySelector("tbody").append(...deviceRows(next.devices));
      return next.next_cursor;
    }, () => extend());
    const messages = table(["send at", "event", "state", "code", "content-state", "pushes"], messageRows(timeline.messages), "Messages");
    const older = moreButton("Older messages", timeline.next_cursor, async (cursor) => {
      const next = await api("messages" + query({ live_activity_id: id, limit: 20, cursor }));
      messages.querySelector("tbody").append(...messageRows(next.messages));
      return next.next_cursor;
    }, () => extend());
    return h("div", {},
      h("div", { class: "split" }, h("div", {}, preview), h("div", {}, summary, actions)),
      h("h2", {}, "Messages ", liveBadge()),
      messages, h("p", {}, older),
      h("h2", {}, "Delivery per device"), devices, h("p", {}, more));
  });
  await update();
  return pageElement("Activity " + id, holder);
};

// MARK: - Compose

const schemaInputs = {
  string: (id) => h("input", { id, type: "text" }),
  number: (id) => h("input", { id, type: "number", step: "any" }),
  integer: (id) => h("input", { id, type: "number", step: "1" }),
  boolean: (id) => h("input", { id, type: "checkbox" }),
  date: (id) => h("input", { id, type: "datetime-local", step: "1" }),
};

// A form for one struct of a schema ({field: "type" | "type?" | {…} | [type]}); `read()` gives the object.
function schemaForm(prefix, fields, initial) {
  const readers = [];
  const controls = Object.entries(fields || {}).map(([name, type]) => {
    const id = prefix + "-" + name.replace(/[^A-Za-z0-9_-]/g, "_");
    const optional = typeof type === "string" && type.endsWith("?");
    const base = typeof type === "string" ? type.replace(/\?$/, "") : Array.isArray(type) ? "array" : "object";
    const value = initial ? initial[name] : undefined;
    let control;
    // A struct with its fields declared (the SDK's defaults keep everything under "data"): one input per field inside it.
    if (base === "object" && type && typeof type === "object" && Object.keys(type).length > 0) {
      const nested = schemaForm(id, type, value && typeof value === "object" ? value : undefined);
      readers.push((lenient) => [name, nested.read(lenient)]);
      return h("fieldset", {}, h("legend", {}, name), nested.element);
    }
    if (schemaInputs[base]) {
      control = schemaInputs[base](id);
      if (value !== undefined && value !== null) {
        if (base === "boolean") control.checked = Boolean(value);
        else if (base === "date") { if (typeof value === "number") control.value = new Date(value * 1000).toISOString().slice(0, 19); }
        else control.value = value;
      }
    } else {
      control = h("textarea", { id, rows: 3, placeholder: base === "array" ? "[ … ] as JSON" : "{ … } as JSON" });
      if (value !== undefined) control.value = JSON.stringify(value);
    }
    control.dataset.field = name;
    // Lenient: a value of the right type stands in for an empty field (the audience count needs a valid request).
    const standIn = { string: "", number: 0, integer: 0, date: Math.floor(Date.now() / 1000), array: [], object: {} }[base];
    readers.push((lenient) => {
      if (base === "boolean") return [name, control.checked];
      const text = control.value.trim();
      if (text === "") {
        if (optional) return null;
        if (lenient) return [name, standIn];
        throw new Error(prefix + "." + name + ": is required by the schema");
      }
      if (base === "number") return [name, Number(text)];
      if (base === "integer") return [name, parseInt(text, 10)];
      if (base === "date") return [name, Math.floor(new Date(text + "Z").getTime() / 1000)];
      if (base === "string") return [name, text];
      try { return [name, JSON.parse(text)]; } catch (error) {
        if (lenient) return [name, standIn];
        throw new Error(prefix + "." + name + ": is not valid JSON");
      }
    });
    return h("div", {}, h("label", { for: id }, name, " ", h("span", { class: "muted" }, (typeof type === "string" ? type : JSON.stringify(type)) + (base === "date" ? " (UTC)" : ""))), control);
  });
  return { element: h("div", {}, controls), read: (lenient) => Object.fromEntries(readers.map((read) => read(lenient)).filter(Boolean)) };
}

function jsonForm(id, label, initial) {
  const area = h("textarea", { id, rows: 5 });
  area.value = JSON.stringify(initial || {}, null, 2);
  return {
    element: h("div", {}, h("label", { for: id }, label, " ", h("span", { class: "muted" }, "(JSON; no schema for this type)")), area),
    read: (lenient) => {
      try { return JSON.parse(area.value || "{}"); } catch (error) { if (lenient) return {}; throw new Error(label + ": is not valid JSON"); }
    },
  };
}

pages.compose = async (current) => {
  const event = current.parameters.get("event") || "start";
  const activityID = current.parameters.get("live_activity_id") || "";
  let schemas = (await call("getLiveActivitySchemas", {})).schemas;
  const filters = (await call("listFilters", {})).filters || [];
  let activity = null;
  if (event !== "start" && activityID) {
    try { activity = (await call("getLiveActivity", { live_activity_id: activityID, limit: 1 })).live_activity; } catch (error) { activity = null; }
  }
  // An update is checked against the schema version its activity started with (X2): the form is that version's.
  if (activity && activity.attributes_type && activity.schema_version) {
    const versions = (await call("getLiveActivitySchemas", { attributes_type: activity.attributes_type })).schemas;
    const started = versions.find((schema) => schema.version === activity.schema_version);
    if (started) schemas = schemas.filter((schema) => schema.attributes_type !== started.attributes_type).concat([started]);
  }
  const form = h("form", { class: "panel", novalidate: true });
  const eventSelect = h("select", { id: "compose-event" }, ["start", "update", "end"].map((value) => h("option", { value, selected: value === event }, value)));
  eventSelect.addEventListener("change", () => { location.hash = "#/compose" + query({ event: eventSelect.value, live_activity_id: idInput.value }); });
  const idInput = h("input", { id: "compose-activity", type: "text", value: activityID, required: true, autocomplete: "off" });
  const typeSelect = h("select", { id: "compose-type" }, schemas.map((schema) => h("option", { value: schema.attributes_type }, schema.attributes_type)),
    h("option", { value: "" }, "another type (JSON)…"));
  const typeOther = h("input", { id: "compose-type-other", type: "text", placeholder: "attributes type", hidden: schemas.length > 0,
    "aria-label": "Attributes type without a schema" });
  if (activity && activity.attributes_type) typeSelect.value = schemas.some((s) => s.attributes_type === activity.attributes_type) ? activity.attributes_type : "";
  const fieldsHolder = h("div", {});
  const attributesHolder = h("div", {});
  let contentForm = null, attributesForm = null;
  const currentType = () => typeSelect.value || typeOther.value.trim();
  const buildFields = () => {
    typeOther.hidden = typeSelect.value !== "";
    const schema = schemas.find((s) => s.attributes_type === typeSelect.value);
    const initial = activity ? activity.content_state : undefined;
    contentForm = schema ? schemaForm("content-state", schema.content_state, initial) : jsonForm("content-state-json", "content-state", initial);
    fieldsHolder.replaceChildren(h("h2", {}, "Content state"), contentForm.element);
    if (event === "start") {
      attributesForm = schema ? schemaForm("attributes", schema.attributes, {}) : jsonForm("attributes-json", "attributes", {});
      attributesHolder.replaceChildren(h("h2", {}, "Attributes"), attributesForm.element);
    }
    scheduleAudience();
  };
  typeSelect.addEventListener("change", buildFields);

  // Targeting (starts): a filter, devices or users.
  const targetKind = h("select", { id: "compose-target" }, [["filter", "a filter"], ["devices", "devices (HWIDs or push tokens)"], ["users", "users (User IDs)"]]
    .map(([value, label]) => h("option", { value }, label)));
  const filterSelect = h("select", { id: "compose-filter" }, filters.map((filter) => h("option", { value: filter.name }, filter.name)));
  const listInput = h("textarea", { id: "compose-list", rows: 2, placeholder: "one per line", hidden: true });
  const listLabel = h("label", { for: "compose-list", hidden: true }, "Devices or users");
  targetKind.addEventListener("change", () => {
    const list = targetKind.value !== "filter";
    filterSelect.hidden = list; filterSelect.previousElementSibling.hidden = list;
    listInput.hidden = !list; listLabel.hidden = !list;
    scheduleAudience();
  });
  listInput.addEventListener("input", scheduleAudience);
  filterSelect.addEventListener("change", scheduleAudience);
  const audience = h("p", { id: "compose-audience", "aria-live": "polite", class: "muted" });

  const titleInput = h("input", { id: "compose-title", type: "text", placeholder: event === "start" ? "alert title (needed by starts, S2)" : "optional" });
  const bodyInput = h("input", { id: "compose-content", type: "text", placeholder: event === "start" ? "alert text" : "optional" });
  const prioritySelect = h("select", { id: "compose-priority" }, [["5", "5 — when convenient (the API's default)"], ["10", "10 — now (counts against the hourly budget, A7)"]]
    .map(([value, label]) => h("option", { value }, label)));
  const sendDate = h("input", { id: "compose-send", type: "datetime-local" });
  const staleDate = h("input", { id: "compose-stale", type: "datetime-local", step: "1" });
  const dismissal = h("input", { id: "compose-dismissal", type: "datetime-local", step: "1" });
  const preview = h("div", { id: "compose-preview", "aria-live": "polite" });
  const curl = h("pre", { id: "compose-curl" });
  const error = h("p", { class: "error", role: "alert", id: "compose-error" });

  const utc = (value) => value ? value.replace("T", " ").slice(0, 16) : null;
  const seconds = (value) => value ? Math.floor(new Date(value + "Z").getTime() / 1000) : undefined;
  // `lenient` (the audience count): empty or unreadable fields get stand-ins, so only the targeting can fail.
  function notification(lenient) {
    const liveActivity = { "content-state": contentForm.read(lenient) };
    if (staleDate.value) liveActivity["stale-date"] = seconds(staleDate.value);
    const item = { live_activity_id: idInput.value.trim(), live_activity: liveActivity, apns_priority: Number(prioritySelect.value) };
    if (!item.live_activity_id && lenient && event === "start") item.live_activity_id = "AUDIENCE_COUNT";
    if (!item.live_activity_id) throw new Error("live_activity_id: is required");
    if (titleInput.value.trim()) item.title = titleInput.value.trim();
    if (bodyInput.value.trim()) item.content = bodyInput.value.trim();
    if (lenient && event === "start" && !item.title && !item.content) item.content = "audience";
    if (sendDate.value) { item.send_date = utc(sendDate.value); item.timezone = "UTC"; }
    if (event === "start") {
      liveActivity.event = "start";
      liveActivity["attributes-type"] = currentType();
      liveActivity.attributes = attributesForm.read(lenient);
      if (targetKind.value === "filter") item.filter = filterSelect.value;
      else item[targetKind.value] = listInput.value.split(/[\n,]/).map((entry) => entry.trim()).filter(Boolean);
    } else {
      liveActivity.event = event;
      if (event === "end" && dismissal.value) liveActivity["dismissal-date"] = seconds(dismissal.value);
    }
    return item;
  }
  const method = event === "start" ? "startLiveActivity" : "updateLiveActivity";
  function showCurl(request) {
    const body = JSON.stringify({ request: { application: state.application, auth: "SERVER_API_TOKEN", ...request } });
    curl.textContent = "curl -s " + location.origin + "/json/1.3/" + method + " \\\n  -d '" + body.replace(/'/g, "'\\''") + "'";
  }

  // A dry run: every check, the exact APNs requests, nothing stored or sent (X3).
  async function dryRun(lenient) {
    const request = { notifications: [notification(lenient)], dry_run: true };
    if (!lenient) showCurl({ notifications: request.notifications });
    return call(method, request);
  }
  let audienceTimer = null;
  function scheduleAudience() {
    clearTimeout(audienceTimer);
    if (event === "start" && targetKind.value !== "filter" && !listInput.value.trim()) {
      audience.textContent = "Audience: none yet; list " + (targetKind.value === "users" ? "User IDs" : "HWIDs or push tokens") + ", one per line";
      return;
    }
    audienceTimer = setTimeout(async () => {
      try {
        const answer = await dryRun(true);
        const targets = answer.dry_run.reduce((sum, entry) => sum + entry.targets, 0);
        audience.textContent = "Audience: " + targets.toLocaleString() + (targets === 1 ? " device" : " devices");
      } catch (failure) {
        audience.textContent = "Audience: — (" + failure.message + ")";
      }
    }, 300);
  }

  const previewButton = h("button", { type: "button", class: "quiet", id: "compose-dry-run", onclick: async () => {
    error.textContent = "";
    try {
      const answer = await dryRun(false);
      preview.replaceChildren(h("h2", {}, "Dry run: the APNs requests"), ...answer.dry_run.map((entry) => h("div", {},
        h("p", {}, entry.targets.toLocaleString() + " device(s) · sent at " + when(entry.send_at)),
        ...entry.pushes.map((push) => h("div", { class: "panel" },
          h("p", {}, h("strong", {}, push.hwid), push.skipped ? " — skipped: " + push.skipped : h("span", { class: "bytes" }, " — " + push.bytes + " bytes of payload")),
          push.skipped ? null : h("pre", {}, push.path + "\n" + Object.entries(push.headers).map(([k, v]) => k + ": " + v).join("\n") + "\n\n" + JSON.stringify(push.payload, null, 2)))),
        ...(entry.broadcasts || []).map((broadcast) => h("pre", {}, JSON.stringify(broadcast, null, 2))))),
        answer.warnings ? h("ul", {}, answer.warnings.map((warning) => h("li", {}, warning))) : null);
    } catch (failure) { error.textContent = failure.message; }
  } }, "Preview (dry run)");
  const sendButton = h("button", { type: "submit", id: "compose-send-button" }, "Send " + event);
  form.addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    error.textContent = "";
    try {
      const request = { notifications: [notification()] };
      showCurl(request);
      sendButton.disabled = true;
      const answer = await call(method, request);
      toast("Accepted: " + answer.Messages.join(", "));
      preview.replaceChildren(h("p", { role: "status" }, "Accepted as ", h("code", {}, answer.Messages.join(", ")), ". ",
        link("activity/" + encodeURIComponent(idInput.value.trim()), "See the activity")),
        answer.warnings ? h("ul", {}, answer.warnings.map((warning) => h("li", {}, warning))) : null);
    } catch (failure) {
      error.textContent = failure.message;
    } finally {
      sendButton.disabled = false;
    }
  });

  form.append(
    h("div", { class: "split" },
      h("div", {}, h("label", { for: "compose-event" }, "Event"), eventSelect),
      h("div", {}, h("label", { for: "compose-activity" }, "live_activity_id"), idInput)),
    event === "start" ? h("div", { class: "split" },
      h("div", {}, h("label", { for: "compose-type" }, "Attributes type"), typeSelect, typeOther),
      h("div", {}, h("label", { for: "compose-target" }, "Send to"), targetKind,
        h("label", { for: "compose-filter" }, "Filter"), filterSelect, listLabel, listInput, audience)) : audience,
    fieldsHolder, attributesHolder,
    h("h2", {}, "Alert and delivery"),
    h("div", { class: "split" },
      h("div", {}, h("label", { for: "compose-title" }, "Alert title"), titleInput),
      h("div", {}, h("label", { for: "compose-content" }, "Alert text"), bodyInput),
      h("div", {}, h("label", { for: "compose-priority" }, "apns_priority"), prioritySelect),
      h("div", {}, h("label", { for: "compose-send" }, "Send at (UTC; empty: now)"), sendDate),
      h("div", {}, h("label", { for: "compose-stale" }, "Stale at (UTC; optional)"), staleDate),
      event === "end" ? h("div", {}, h("label", { for: "compose-dismissal" }, "Dismiss at (UTC; optional)"), dismissal) : null),
    error,
    h("p", { class: "row" }, previewButton, sendButton),
    h("h2", {}, "The same call with curl"), curl, preview);
  if (event !== "start" && !typeSelect.value && activity && activity.attributes_type) typeOther.value = activity.attributes_type;
  buildFields();
  // Another activity: its content-state and type, so the form is rebuilt for it.
  if (event !== "start") idInput.addEventListener("change", () => { location.hash = "#/compose" + query({ event, live_activity_id: idInput.value.trim() }); });
  return pageElement(event === "start" ? "Start a Live Activity" : event === "update" ? "Update a Live Activity" : "End a Live Activity", form);
};

// MARK: - Devices, filters, schemas, channels

pages.devices = async (current) => {
  const text = current.parameters.get("q") || "";
  const search = h("form", { class: "row panel", role: "search", onsubmit: (event) => {
    event.preventDefault();
    location.hash = "#/devices" + query({ q: new FormData(event.target).get("q") });
  } }, h("div", { style: null }, h("label", { for: "device-search" }, "HWID (or its start) or User ID"),
    h("input", { id: "device-search", name: "q", type: "search", value: text })), h("div", {}, h("button", { type: "submit" }, "Search")));
  const detail = h("div", { id: "device-detail" });
  const rowsOf = (devices) => devices.map((device) => h("tr", {},
    h("td", {}, h("button", { type: "button", class: "quiet", onclick: () => showDevice(device.hwid, detail) }, device.hwid)),
    h("td", {}, device.user_id || "—"), h("td", {}, device.os_version || "—"), h("td", {}, device.gateway),
    h("td", {}, device.push_token ? "yes" : "no"), h("td", {}, when(device.updated_at))));
  const first = await api("devices" + query({ q: text }));
  const list = table(["HWID", "User ID", "iOS", "gateway", "push token", "updated"], rowsOf(first.devices), "Devices");
  const more = moreButton("Load more", first.next_cursor, async (cursor) => {
    const next = await api("devices" + query({ q: text, cursor }));
    list.querySelector("tbody").append(...rowsOf(next.devices));
    return next.next_cursor;
  });
  if (text && first.devices.length === 1) showDevice(first.devices[0].hwid, detail);
  return pageElement("Devices", search, list, h("p", {}, more), detail);
};

async function showDevice(hwid, holder) {
  try {
    const [health, tags] = await Promise.all([call("getDeviceHealth", { hwid }), call("getTags", { hwid })]);
    const device = health.device;
    const tokenRows = [
      ...device.push_to_start_tokens.map((token) => h("tr", {}, h("td", {}, "push-to-start"), h("td", {}, token.attributes_type || "any type"),
        h("td", {}, "reported"), h("td", {}, age(token.reported_at)))),
      ...device.activity_tokens.map((token) => h("tr", {}, h("td", {}, "update"), h("td", {}, token.live_activity_id),
        h("td", {}, token.active ? "active" : "given up"), h("td", {}, age(token.reported_at)))),
    ];
    const history = device.token_history.map((change) => h("tr", {}, h("td", {}, change.kind), h("td", {}, change.slot || "—"),
      h("td", {}, change.removed ? "removed" : h("code", {}, "…" + change.token_suffix)), h("td", {}, when(change.at))));
    holder.replaceChildren(h("div", { class: "panel" }, h("h2", {}, "Device " + hwid),
      h("p", {}, "Gateway ", h("strong", {}, device.gateway), " · ", device.registered ? "registered" : "no push token",
        " · push token changed ", age(device.push_token_changed_at), " ago"),
      device.flags.length ? h("ul", {}, device.flags.map((flag) => h("li", { class: "error" }, h("strong", {}, flag.code), ": ", flag.message))) : null,
      h("h3", {}, "Tokens"), table(["kind", "for", "state", "age"], tokenRows, "Tokens"),
      h("h3", {}, "Token changes"), table(["kind", "slot", "token", "at"], history, "Token changes"),
      h("h3", {}, "Tags"), table(["tag", "value"], Object.entries(tags.result).map(([name, value]) =>
        h("tr", {}, h("td", {}, name), h("td", {}, h("code", {}, JSON.stringify(value))))), "Tags")));
    holder.scrollIntoView({ block: "nearest" });
  } catch (error) {
    holder.replaceChildren(h("p", { class: "error", role: "alert" }, error.message));
  }
}

pages.filters = async () => {
  const { holder, update } = refreshing(async () => {
    const filters = (await call("listFilters", {})).filters || [];
    return table(["name", "operator", "conditions", ""], filters.map((filter) => h("tr", {},
      h("td", {}, filter.name), h("td", {}, filter.operator || "AND"), h("td", {}, h("code", {}, JSON.stringify(filter.conditions))),
      h("td", {}, h("button", { type: "button", class: "danger", "aria-label": "Delete the filter " + filter.name, onclick: async () => {
        if (!confirm("Delete the filter " + filter.name + "?")) return;
        try { await call("deleteFilter", { name: filter.name }); toast("Deleted " + filter.name); update(); } catch (error) { toast(error.message); }
      } }, "Delete")))), "Filters");
  });
  await update();
  const error = h("p", { class: "error", role: "alert" });
  const conditions = h("textarea", { id: "filter-conditions", rows: 3 });
  conditions.value = '[["Demo", "EQ", "food-delivery"]]';
  const create = h("form", { class: "panel", onsubmit: async (event) => {
    event.preventDefault();
    error.textContent = "";
    const data = new FormData(event.target);
    try {
      await call("createFilter", { name: data.get("name"), operator: data.get("operator"), conditions: JSON.parse(conditions.value) });
      toast("Created " + data.get("name"));
      event.target.reset();
      update();
    } catch (failure) { error.textContent = failure.message; }
  } }, h("h2", {}, "New filter"),
    h("div", { class: "split" }, h("div", {}, h("label", { for: "filter-name" }, "Name"), h("input", { id: "filter-name", name: "name", type: "text", required: true })),
      h("div", {}, h("label", { for: "filter-operator" }, "Operator"), h("select", { id: "filter-operator", name: "operator" }, h("option", {}, "AND"), h("option", {}, "OR")))),
    h("label", { for: "filter-conditions" }, "Conditions ", h("span", { class: "muted" }, "[[tag, operator, value], …] (X1)")), conditions, error,
    h("p", {}, h("button", { type: "submit" }, "Create filter")));
  return pageElement("Filters", holder, create);
};

pages.schemas = async () => {
  const { holder, update } = refreshing(async () => {
    let schemas = (await call("getLiveActivitySchemas", {})).schemas;
    return table(["attributes type", "version", "content-state", "attributes", "description"], schemas.map((schema) => h("tr", {},
      h("td", {}, schema.attributes_type), h("td", { class: "num" }, String(schema.version)),
      h("td", {}, h("code", {}, JSON.stringify(schema.content_state))), h("td", {}, h("code", {}, JSON.stringify(schema.attributes))),
      h("td", {}, schema.description || "—"))), "Schemas");
  });
  await update();
  const error = h("p", { class: "error", role: "alert" });
  const contentState = h("textarea", { id: "schema-content", rows: 3 });
  contentState.value = '{"status": "string", "estimatedTime": "string", "emoji": "string?"}';
  const attributes = h("textarea", { id: "schema-attributes", rows: 2 });
  attributes.value = "{}";
  const form = h("form", { class: "panel", onsubmit: async (event) => {
    event.preventDefault();
    error.textContent = "";
    const data = new FormData(event.target);
    try {
      const answer = await call("setLiveActivitySchema", { attributes_type: data.get("type"), content_state: JSON.parse(contentState.value),
        attributes: JSON.parse(attributes.value || "{}"), description: data.get("description") || undefined });
      toast(answer.attributes_type + " is now at version " + answer.version);
      update();
    } catch (failure) { error.textContent = failure.message; }
  } }, h("h2", {}, "Set a schema"),
    h("label", { for: "schema-type" }, "Attributes type"), h("input", { id: "schema-type", name: "type", type: "text", required: true }),
    h("label", { for: "schema-content" }, "content-state ", h("span", { class: "muted" }, "{field: type}; types string number integer boolean date object array, ? when optional")), contentState,
    h("label", { for: "schema-attributes" }, "attributes"), attributes,
    h("label", { for: "schema-description" }, "Description"), h("input", { id: "schema-description", name: "description", type: "text" }),
    error, h("p", {}, h("button", { type: "submit" }, "Save schema")));
  return pageElement("Schemas", holder, form);
};

pages.channels = async () => {
  const { holder, update } = refreshing(async () => {
    const channels = (await call("listLiveActivityChannels", {})).channels || [];
    return table(["name", "storage policy", "environments", "created", "last used", ""], channels.map((channel) => h("tr", {},
      h("td", {}, channel.name), h("td", {}, channel.storage_policy || "—"),
      h("td", {}, Object.keys(channel.apns_channel_ids || {}).join(", ") || "—"), h("td", {}, when(channel.created_at)), h("td", {}, when(channel.last_used_at)),
      h("td", {}, h("button", { type: "button", class: "danger", "aria-label": "Delete the channel " + channel.name, onclick: async () => {
        if (!confirm("Delete the channel " + channel.name + " at Apple and in Islet?")) return;
        try { await call("deleteLiveActivityChannel", { name: channel.name }); toast("Deleted " + channel.name); update(); } catch (error) { toast(error.message); }
      } }, "Delete")))), "Channels");
  });
  await update();
  const error = h("p", { class: "error", role: "alert" });
  const form = h("form", { class: "panel", onsubmit: async (event) => {
    event.preventDefault();
    error.textContent = "";
    const data = new FormData(event.target);
    try {
      await call("createLiveActivityChannel", { name: data.get("name"), storage_policy: data.get("policy") });
      toast("Created " + data.get("name"));
      update();
    } catch (failure) { error.textContent = failure.message; }
  } }, h("h2", {}, "New channel"),
    h("div", { class: "split" }, h("div", {}, h("label", { for: "channel-name" }, "Name"), h("input", { id: "channel-name", name: "name", type: "text", required: true })),
      h("div", {}, h("label", { for: "channel-policy" }, "Storage policy"),
        h("select", { id: "channel-policy", name: "policy" }, h("option", { value: "none" }, "none"), h("option", { value: "most_recent" }, "most_recent")))),
    error, h("p", {}, h("button", { type: "submit" }, "Create channel")));
  return pageElement("Channels", holder, form);
};

// MARK: - Simulator

pages.simulator = async () => {
  if (!state.session.simulator) return pageElement("Simulator", h("p", {}, "The simulator runs only when islet serve runs with --apns simulator."));
  const { holder, update, extend } = refreshing(async () => {
    // Every phone, a page at a time (the simulator's pages hold up to 1,000).
    const phones = [];
    let cursor = null;
    do {
      const page = await api("simulator/devices" + query({ limit: 1000, cursor }));
      phones.push(...page.devices);
      cursor = page.next_cursor;
    } while (cursor);
    return h("div", { class: "phones" }, phones.map((phone) => {
      if (phone.platform === "android") return androidPhone(phone);
      const cards = phone.lock_screen.map((card) => liveActivityCard({
        id: card.activity_id, app: card.attributes_type, title: card.activity_id, content: card.content_state, ended: card.ended,
        stale: card.stale, waiting: card.waiting_for_unlock,
      }));
      const log = h("pre", {}, "…");
      const details = h("details", { ontoggle: async (event) => {
        if (!event.target.open) return;
        extend();
        const full = await api("simulator/devices/" + encodeURIComponent(phone.hwid));
        log.textContent = full.log.slice().reverse().map((push) => push.at + "  " + push.push_type + (push.event ? " " + push.event : "") + "  priority " + push.priority
          + (push.dropped ? "  DROPPED: " + push.dropped : "")).join("\n") || "No pushes yet.";
      } }, h("summary", {}, "Pushes received and dropped"), log);
      const set = (setting) => async () => {
        try { await api("simulator/devices/" + encodeURIComponent(phone.hwid) + "/state", { method: "POST", body: { state: setting } }); update(true); }
        catch (error) { toast(error.message); }
      };
      const frame = phoneFrame(phone.hwid + " · iOS " + phone.ios_version + (phone.locked ? " · locked" : "") + (phone.uninstalled ? " · app uninstalled" : ""), ...cards);
      frame.setAttribute("data-hwid", phone.hwid);
      frame.prepend(h("h3", {}, phone.hwid));
      frame.append(h("div", { class: "buttons" },
        // The same id either way, so focus stays on the button after the phone is redrawn.
        h("button", { type: "button", id: "lock-" + phone.hwid, onclick: set(phone.locked ? "unlocked" : "locked"), "aria-label": (phone.locked ? "Unlock " : "Lock ") + phone.hwid },
          phone.locked ? "Unlock" : "Lock"),
        h("button", { type: "button", id: "uninstall-" + phone.hwid, onclick: set("uninstalled"), disabled: phone.uninstalled, "aria-label": "Uninstall the app on " + phone.hwid },
          "Uninstall app")), details);
      return frame;
    }));
  });
  // A simulated Android phone (issue 46): its notification shade's Live Updates and ordinary notifications.
  const androidPhone = (phone) => {
    const cards = phone.shade.map((update) => liveUpdateCard(update, ""));
    const notifications = phone.notifications.map((text) => h("div", { class: "lu-card" }, h("div", { class: "lu-head" }, "Notification"), h("div", {}, text)));
    const frame = shadeFrame(phone.hwid + " · Android " + phone.android_version + (phone.uninstalled ? " · app uninstalled" : ""), ...cards, ...notifications);
    frame.setAttribute("data-hwid", phone.hwid);
    frame.prepend(h("h3", {}, phone.hwid));
    const set = (setting) => async () => {
      try { await api("simulator/devices/" + encodeURIComponent(phone.hwid) + "/state", { method: "POST", body: { state: setting } }); update(true); }
      catch (error) { toast(error.message); }
    };
    frame.append(h("div", { class: "buttons" }, h("button", { type: "button", id: "uninstall-" + phone.hwid, onclick: set("uninstalled"),
      disabled: phone.uninstalled, "aria-label": "Uninstall the app on " + phone.hwid }, "Uninstall app")));
    return frame;
  };
  await update();
  return pageElement("Simulator", h("p", {}, liveBadge(), " Each simulated iPhone's lock screen and Android phone's notification shade, as the pushes it received left them."), holder);
};

// MARK: - Start

async function start() {
  setUpChrome();
  try {
    signedIn(await api("session"));
  } catch (error) {
    showSignIn(error.status === 401 ? "" : error.message);
  }
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
