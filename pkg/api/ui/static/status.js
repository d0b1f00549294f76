// cri-prober's status page, kept live: it follows the agent's event stream
// (/api/v1/events?watch=1, server-sent events), adds each event to the
// table with textContent, and fetches the page again to replace the parts
// that changed (summary, restarts, each pod). The agent's html/template is
// the one renderer of pods: this script builds no HTML from strings. With
// it off, the page is a snapshot.
'use strict';

(() => {
  const body = document.body;
  const live = document.getElementById('live');
  const eventRows = document.getElementById('events-body');
  const noEvents = document.getElementById('no-events');
  const maxEvents = Number(eventRows.dataset.max) || 100;
  const namespace = body.dataset.namespace || '';
  // What workloads control is shown cut as the agent's page cuts it
  // (shownName, shownMessage).
  const shownName = 253;
  const shownMessage = 500;

  // The one HTML sink: the page fetched from the agent, parsed into an
  // inert document. Trusted Types (the page's CSP) refuse any other.
  const policy = window.trustedTypes
    ? window.trustedTypes.createPolicy('cri-prober', { createHTML: (html) => html })
    : { createHTML: (html) => html };

  const setLive = (text) => { live.textContent = text; };
  const clock = () => new Date().toTimeString().slice(0, 8);

  // eventKey is the page's eventKey (statuspage.go), from the stream's JSON.
  const eventKey = (e) => [e.time, e.namespace, e.pod, e.container || '', e.reason, String(e.count || 0)].join('|');

  // printable is the agent's Printable: control characters as \xNN,
  // bidirectional controls as \uNNNN, line breaks and tabs as spaces.
  const printable = (s) => String(s ?? '').replace(/[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => {
    if (c === '\n' || c === '\r' || c === '\t') return ' ';
    const code = c.charCodeAt(0);
    return code < 0x100 ? '\\x' + code.toString(16).padStart(2, '0') : '\\u' + code.toString(16).padStart(4, '0');
  });
  const cut = (s, n) => (s.length > n ? s.slice(0, n) + '… (cut)' : s);

  const seen = new Set(Array.from(eventRows.rows, (row) => row.dataset.key));

  function cell(row, text, className) {
    const td = row.insertCell();
    td.textContent = text;
    if (className) td.className = className;
    return td;
  }

  function addEvent(e) {
    if (namespace && e.namespace !== namespace) return;
    const key = eventKey(e);
    if (seen.has(key)) return;
    seen.add(key);
    const row = document.createElement('tr');
    row.dataset.key = key;
    row.dataset.time = e.time;
    const warning = e.type === 'Warning';
    if (warning) row.className = 'warning';
    const time = document.createElement('time');
    time.dateTime = e.time;
    time.textContent = String(e.time).slice(11, 19); // the agent's clock, as the page shows it
    cell(row, '', 'nowrap').append(time);
    cell(row, (warning ? '⚠ ' : '') + cut(printable(e.type), shownName), 'nowrap');
    cell(row, cut(printable(e.reason), shownName));
    cell(row, cut(printable([e.namespace, e.pod, e.container].filter(Boolean).join('/')), 3 * shownName));
    cell(row, e.threshold > 0 ? `${e.count}/${e.threshold}` : '');
    cell(row, cut(printable(e.message), shownMessage), 'message');
    // Newest first: after any newer row (a replay may bring older ones).
    const at = Date.parse(e.time);
    let before = eventRows.firstElementChild;
    while (before && Date.parse(before.dataset.time) > at) before = before.nextElementSibling;
    eventRows.insertBefore(row, before);
    while (eventRows.rows.length > maxEvents) {
      seen.delete(eventRows.lastElementChild.dataset.key);
      eventRows.lastElementChild.remove();
    }
    noEvents.hidden = true;
  }

  // Refreshing: half a second after the first event of a burst (one fetch
  // for the burst: the page is a few KiB per pod shown), at most one in
  // flight, and one more queued behind it however many events arrive. A
  // page out of sight fetches nothing (every open page costs the agent a
  // render per burst): it is brought up to date when it is shown again.
  let timer = null;
  let inFlight = false;
  let again = false;
  let stale = false;

  function schedule(delay = 500) {
    if (document.visibilityState !== 'visible') {
      stale = true;
      return;
    }
    if (timer === null) timer = setTimeout(refresh, delay);
  }

  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible' && stale) {
      stale = false;
      schedule(0);
    }
  });

  async function refresh() {
    timer = null;
    if (inFlight) {
      again = true;
      return;
    }
    inFlight = true;
    try {
      const resp = await fetch(location.href, { cache: 'no-store', credentials: 'same-origin', headers: { Accept: 'text/html' } });
      if (!resp.ok) throw new Error(`${resp.status} ${resp.statusText}`);
      const doc = new DOMParser().parseFromString(policy.createHTML(await resp.text()), 'text/html');
      swap(doc);
      if (stream) setLive(`live · updated ${clock()}`);
    } catch (err) {
      setLive(`could not update (${err.message}); showing the page as of its last update`);
    } finally {
      inFlight = false;
      if (again) {
        again = false;
        schedule();
      }
    }
  }

  function replaceIfChanged(current, next) {
    if (current && next && !current.isEqualNode(next)) current.replaceWith(document.adoptNode(next));
  }

  // swap replaces the parts of the page that differ in doc: the summary,
  // the restarts, and each pod (all of the pods when the list itself
  // changed: a pod came, went, or the page's share of them moved).
  function swap(doc) {
    replaceIfChanged(document.getElementById('summary'), doc.getElementById('summary'));
    replaceIfChanged(document.getElementById('restarts'), doc.getElementById('restarts'));
    const current = document.getElementById('pods');
    const next = doc.getElementById('pods');
    if (!current || !next) return;
    const parts = (el) => Array.from(el.children, (c) => c.dataset.part || c.tagName).join('\n');
    if (parts(current) !== parts(next)) {
      current.replaceWith(document.adoptNode(next));
      return;
    }
    const fresh = Array.from(next.children);
    fresh.forEach((child, i) => replaceIfChanged(current.children[i], child));
  }

  // Following the events: from the page's own time (events already shown
  // are skipped), and after a break from the newest one seen.
  let stream = null;
  let since = body.dataset.since;
  let broken = false;

  function connect() {
    setLive('connecting to the event stream…');
    stream = new EventSource(`api/v1/events?watch=1&since=${encodeURIComponent(since)}`);
    stream.onopen = () => {
      setLive(`live · updated ${clock()}`);
      if (broken) schedule(0); // whatever happened while not following
      broken = false;
    };
    stream.onmessage = (m) => {
      let e;
      try {
        e = JSON.parse(m.data);
      } catch {
        return;
      }
      addEvent(e);
      if (typeof e.time === 'string') since = e.time; // RFC 3339; its fraction is allowed
      schedule();
    };
    stream.onerror = () => {
      // The agent went away, or refused the stream (it serves a few at
      // once): try again in a while, from the newest event seen.
      stream.close();
      stream = null;
      broken = true;
      setLive('not live: the event stream broke; retrying in 5 s');
      setTimeout(connect, 5000);
    };
  }

  // Ages, and pods that no event concerns (a new pod without probes), are
  // brought up to date now and then while the page is looked at.
  setInterval(() => {
    if (stream) schedule(0);
  }, 30000);

  connect();
})();
