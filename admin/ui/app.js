// The outbox operator page: overview, dead letters, search and audit log over
// the admin API (/api/v1). Every value that comes from the server is put on
// the page as text (textContent, createTextNode, setAttribute); nothing is
// ever parsed as HTML.
(function () {
  'use strict';

  var TOKEN_KEY = 'outbox-admin-token';
  var REFRESH_MS = 5000;
  var STATUSES = ['pending', 'sent', 'consumed', 'dead'];
  var SVG_NS = 'http://www.w3.org/2000/svg';

  var state = {
    token: sessionStorage.getItem(TOKEN_KEY) || '',
    view: '',
    signedIn: false,
    timer: 0,
    dead: { topic: '', key: '', before: null },
    search: { params: null, before: null, history: [] },
    table: null, // the adopted table the server shows, null for outbox_messages
    detail: null, // the message shown in the detail dialog
    detailTimer: 0
  };

  function $(id) { return document.getElementById(id); }

  // el builds an element; string and number children become text nodes.
  function el(tag, attrs) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (k) {
        if (attrs[k] === null || attrs[k] === undefined || attrs[k] === false) return;
        if (k === 'text') node.textContent = String(attrs[k]);
        else if (k === 'className') node.className = attrs[k];
        else node.setAttribute(k, String(attrs[k]));
      });
    }
    for (var i = 2; i < arguments.length; i++) append(node, arguments[i]);
    return node;
  }
  function append(node, child) {
    if (child === null || child === undefined) return;
    if (Array.isArray(child)) { child.forEach(function (c) { append(node, c); }); return; }
    node.appendChild(typeof child === 'object' ? child : document.createTextNode(String(child)));
  }
  function svg(tag, attrs) {
    var node = document.createElementNS(SVG_NS, tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === 'text') node.textContent = String(attrs[k]);
      else node.setAttribute(k, String(attrs[k]));
    });
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  // ---- formatting -------------------------------------------------------

  function pad(n) { return n < 10 ? '0' + n : String(n); }
  function fmtTime(s) {
    if (!s) return '–';
    var d = new Date(s);
    if (isNaN(d.getTime())) return String(s);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }
  function fmtAge(sec) {
    if (sec === null || sec === undefined) return '–';
    sec = Number(sec);
    if (!isFinite(sec) || sec <= 0) return '0 s';
    if (sec < 60) return (sec < 10 ? sec.toFixed(1) : Math.round(sec)) + ' s';
    var m = Math.floor(sec / 60);
    if (m < 60) return m + ' min ' + Math.round(sec - m * 60) + ' s';
    var h = Math.floor(m / 60);
    if (h < 48) return h + ' h ' + (m - h * 60) + ' min';
    return Math.floor(h / 24) + ' d ' + (h % 24) + ' h';
  }
  function fmtNum(n) {
    if (n === null || n === undefined) return '–';
    return Number(n).toLocaleString('en-US');
  }
  function fmtRate(n) {
    if (n === null || n === undefined) return '–';
    n = Number(n);
    if (n === 0) return '0 msg/s';
    return (n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(n >= 10 ? 1 : 2)) + ' msg/s';
  }
  function badge(status) { return el('span', { className: 'badge ' + status, text: status }); }

  // ---- notices ----------------------------------------------------------

  var noticeTimer = 0;
  function notice(text, ok) {
    var n = $('notice');
    n.textContent = text;
    n.className = ok ? 'ok' : '';
    n.hidden = false;
    clearTimeout(noticeTimer);
    if (ok) noticeTimer = setTimeout(function () { n.hidden = true; }, 6000);
  }
  function clearNotice() { $('notice').hidden = true; }

  // ---- API --------------------------------------------------------------

  function ApiError(status, message) {
    this.status = status;
    this.message = message;
  }
  ApiError.prototype.toString = function () { return this.message; };

  // api calls the admin API relative to the page, so the page works wherever
  // the handler is mounted.
  function api(method, path, body) {
    var headers = { Accept: 'application/json' };
    if (state.token) headers.Authorization = 'Bearer ' + state.token;
    var init = { method: method, headers: headers, cache: 'no-store', credentials: 'omit' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    return fetch('api/v1/' + path, init).then(function (res) {
      return res.text().then(function (text) {
        var data = null;
        try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
        if (res.ok) return data;
        var msg = (data && typeof data.error === 'string') ? data.error : (text.trim() || res.statusText);
        var err = new ApiError(res.status, msg);
        if (res.status === 401) unauthorized();
        throw err;
      });
    }, function (e) {
      throw new ApiError(0, 'cannot reach the server: ' + e.message);
    });
  }

  // failed reports an API error; 401 is handled by the sign-in prompt.
  function failed(what) {
    return function (err) {
      if (err && err.status === 401) return;
      if (err && err.status === 403) {
        notice(what + ' refused (403): ' + err.message);
        return;
      }
      notice(what + ' failed' + (err && err.status ? ' (' + err.status + ')' : '') + ': ' + (err ? err.message : 'unknown error'));
    };
  }

  function query(params) {
    var parts = [];
    Object.keys(params).forEach(function (k) {
      var v = params[k];
      if (v === '' || v === null || v === undefined) return;
      parts.push(encodeURIComponent(k) + '=' + encodeURIComponent(v));
    });
    return parts.length ? '?' + parts.join('&') : '';
  }

  // ---- sign-in ----------------------------------------------------------

  function unauthorized() {
    var hadToken = !!state.token;
    state.signedIn = false;
    state.token = '';
    sessionStorage.removeItem(TOKEN_KEY);
    stopRefresh();
    closeDialog($('detail'));
    closeDialog($('confirm'));
    showLogin(hadToken
      ? 'The token was refused (401 Unauthorized). Check it and enter it again.'
      : '');
  }

  function showLogin(error) {
    document.querySelectorAll('.view').forEach(function (v) { v.hidden = true; });
    $('signout').hidden = true;
    $('login').hidden = false;
    var e = $('login-error');
    e.textContent = error || '';
    e.hidden = !error;
    $('token-input').value = '';
    $('token-input').focus();
  }

  // loadDatabases fills the database selector when this page is one of a
  // fleet's (the server lists them; a server of one database answers 404).
  function loadDatabases() {
    api('GET', 'databases').then(function (d) {
      var sel = $('database');
      sel.textContent = '';
      (d.databases || []).forEach(function (name) {
        var opt = document.createElement('option');
        opt.value = name;
        opt.textContent = name;
        opt.selected = name === d.current;
        sel.appendChild(opt);
      });
      $('database-pick').hidden = !(d.databases && d.databases.length);
    }, function () {
      $('database-pick').hidden = true;
    });
  }

  function signIn(token) {
    state.token = token;
    // Any API read tells whether the token is accepted.
    return api('GET', 'stats').then(function (stats) {
      if (state.token) sessionStorage.setItem(TOKEN_KEY, state.token);
      state.signedIn = true;
      renderTable(stats.table);
      $('login').hidden = true;
      $('signout').hidden = !state.token;
      route();
      if (state.view === 'overview') renderStats(stats);
      loadDatabases();
    }, function (err) {
      if (err.status !== 401) {
        showLogin('');
        $('login-error').textContent = 'The server answered: ' + err.message;
        $('login-error').hidden = false;
      }
    });
  }

  // ---- views ------------------------------------------------------------

  var VIEWS = { overview: loadOverview, dead: loadDead, search: loadSearch, audit: loadAudit };

  function route() {
    var name = (location.hash || '#overview').slice(1);
    if (!VIEWS[name]) name = 'overview';
    state.view = name;
    document.querySelectorAll('#nav a').forEach(function (a) {
      var on = a.getAttribute('data-view') === name;
      a.classList.toggle('active', on);
      if (on) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    });
    if (!state.signedIn) return;
    document.querySelectorAll('.view').forEach(function (v) { v.hidden = v.id !== 'view-' + name; });
    clearNotice();
    VIEWS[name](true);
    startRefresh();
  }

  function startRefresh() {
    stopRefresh();
    state.timer = setInterval(function () {
      if (document.hidden || !state.signedIn) return;
      if (state.view === 'overview') loadOverview(false);
      else if (state.view === 'dead' && !$('detail').open && !$('confirm').open) loadDead(false);
    }, REFRESH_MS);
  }
  function stopRefresh() { clearInterval(state.timer); state.timer = 0; }

  function refreshed() { $('refreshed').textContent = 'updated ' + fmtTime(new Date()); }

  // ---- overview ---------------------------------------------------------

  function loadOverview() {
    api('GET', 'stats').then(renderStats, failed('Loading the counts'));
    api('GET', 'stats/history').then(renderHistory, failed('Loading the history'));
  }

  // ADOPTED_HIDDEN are the controls of changes an adopted table does not
  // take (the server refuses them): only one dead row at a time goes back.
  var ADOPTED_HIDDEN = ['dead-requeue-all', 'dead-discard-all', 'search-replay', 'detail-discard', 'detail-consumed', 'detail-replay'];

  function renderTable(t) {
    state.table = t || null;
    ADOPTED_HIDDEN.forEach(function (id) { $(id).hidden = !!t; });
    $('table-card').hidden = !t;
    if (!t) return;
    $('table-name').textContent = t.name + ' (profile ' + t.profile + ')';
    var body = $('table-states').tBodies[0];
    clear(body);
    (t.states || []).forEach(function (st) {
      body.appendChild(el('tr', { 'data-state': st.state },
        el('td', { className: 'mono', text: st.state }),
        el('td', { className: 'num', text: fmtNum(st.count) })));
    });
  }

  function renderStats(s) {
    if (!s) return;
    renderTable(s.table);
    STATUSES.forEach(function (st) { $('count-' + st).textContent = fmtNum(s[st]); });
    $('count-expired').textContent = fmtNum(s.expired || 0);
    $('oldest-due').textContent = s.pending ? fmtAge(s.oldest_due_age_seconds) : '–';
    $('oldest-pending').textContent = s.pending ? 'oldest enqueued ' + fmtAge(s.oldest_pending_age_seconds) + ' ago' : '';
    var byTopic = {};
    var names = [];
    (s.topics || []).forEach(function (row) {
      if (!byTopic[row.topic]) { byTopic[row.topic] = {}; names.push(row.topic); }
      byTopic[row.topic][row.status] = (byTopic[row.topic][row.status] || 0) + row.count;
    });
    names.sort();
    var body = $('topics-table').tBodies[0];
    clear(body);
    names.forEach(function (name) {
      body.appendChild(el('tr', { 'data-topic': name },
        el('td', { className: 'wrap', text: name }),
        STATUSES.map(function (st) {
          return el('td', { className: 'num', 'data-status': st, text: fmtNum(byTopic[name][st] || 0) });
        })));
    });
    $('topics-empty').hidden = names.length > 0;
    renderRoutes(s.routes || []);
    renderRelays(s.relays || [], s.routes_agree);
    refreshed();
  }

  function renderRelays(relays, agree) {
    var body = $('relays-table').tBodies[0];
    clear(body);
    relays.forEach(function (r) {
      body.appendChild(el('tr', { 'data-relay': r.id },
        el('td', { className: 'mono', text: r.id }),
        el('td', { text: fmtAge(r.seen_seconds_ago) + ' ago' }),
        el('td', { 'data-wake': '', text: r.wake || '-' }),
        el('td', { className: 'wrap', text: r.routes_fingerprint
          ? r.routes_fingerprint + '  ' + r.routes.join(' ')
          : 'unknown (a version that does not record them)' })));
    });
    $('relays-agree').textContent = relays.length < 2 ? ''
      : agree ? 'The relays route alike.'
        : 'The relays route differently: a message whose topic only some of them route waits, uncharged, for at most the no-route grace.';
    $('relays-agree').className = agree ? 'hint' : 'hint route-down';
    $('relays-card').hidden = relays.length === 0;
  }

  function renderRoutes(routes) {
    var body = $('routes-table').tBodies[0];
    clear(body);
    routes.forEach(function (r) {
      body.appendChild(el('tr', { 'data-route': r.route, 'data-state': r.state },
        el('td', { className: 'wrap', text: r.route }),
        el('td', { className: 'route-' + r.state, text: r.state }),
        el('td', { text: fmtTime(r.since) + ' (' + fmtAge(r.for_seconds) + ')' }),
        el('td', { className: 'wrap', text: r.reason || '' })));
    });
    $('routes-card').hidden = routes.length === 0;
  }

  function renderHistory(h) {
    var samples = (h && h.samples) || [];
    var last = samples.length ? samples[samples.length - 1] : null;
    $('throughput-now').textContent = last && last.delivered_per_second !== null && last.delivered_per_second !== undefined
      ? 'now ' + fmtRate(last.delivered_per_second) : '';
    $('backlog-now').textContent = last ? 'now ' + fmtNum(last.pending) : '';
    chart($('chart-throughput'), samples, 'delivered_per_second');
    chart($('chart-backlog'), samples, 'pending');
  }

  // niceCeil rounds up to 1, 2 or 5 times a power of ten.
  function niceCeil(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var f = v / p;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * p;
  }

  function axisLabel(v) {
    if (v >= 1e6) return (v / 1e6) + 'M';
    if (v >= 1e4) return (v / 1e3) + 'k';
    return String(Math.round(v * 100) / 100);
  }

  // chart draws the last hour of samples[key] as a line over an area.
  // Missing values (null) break the line.
  function chart(node, samples, key) {
    var W = 600, H = 170, L = 64, R = 10, T = 10, B = 24;
    clear(node);
    var pts = [];
    samples.forEach(function (s) {
      var t = Date.parse(s.at);
      if (isNaN(t)) return;
      var v = s[key];
      pts.push({ t: t, v: (v === null || v === undefined) ? null : Number(v) });
    });
    var end = pts.length ? pts[pts.length - 1].t : Date.now();
    var start = end - 3600 * 1000;
    var max = 0;
    pts.forEach(function (p) { if (p.v !== null && p.v > max) max = p.v; });
    max = niceCeil(max);
    var x = function (t) { return L + (W - L - R) * Math.max(0, t - start) / (end - start); };
    var y = function (v) { return T + (H - T - B) * (1 - v / max); };

    [0, 0.5, 1].forEach(function (f) {
      var yy = y(max * f);
      node.appendChild(svg('line', { x1: L, x2: W - R, y1: yy, y2: yy, 'class': 'grid' }));
      node.appendChild(svg('text', { x: L - 6, y: yy + 4, 'text-anchor': 'end', 'class': 'axis', text: axisLabel(max * f) }));
    });
    [['−60 min', start, 'start'], ['−30 min', start + 1800 * 1000, 'middle'], ['now', end, 'end']].forEach(function (a) {
      node.appendChild(svg('text', { x: x(a[1]), y: H - 6, 'text-anchor': a[2], 'class': 'axis', text: a[0] }));
    });

    var runs = [];
    var run = [];
    pts.forEach(function (p) {
      if (p.t < start) return;
      if (p.v === null) { if (run.length) runs.push(run); run = []; return; }
      run.push(p);
    });
    if (run.length) runs.push(run);
    if (!runs.length) {
      node.appendChild(svg('text', { x: (L + W - R) / 2, y: H / 2, 'text-anchor': 'middle', 'class': 'empty', text: 'No samples yet' }));
      return;
    }
    runs.forEach(function (r) {
      var line = r.map(function (p, i) { return (i ? 'L' : 'M') + x(p.t).toFixed(1) + ' ' + y(p.v).toFixed(1); }).join(' ');
      if (r.length === 1) {
        node.appendChild(svg('circle', { cx: x(r[0].t), cy: y(r[0].v), r: 2.5, 'class': 'line' }));
        return;
      }
      var area = line + ' L' + x(r[r.length - 1].t).toFixed(1) + ' ' + y(0) + ' L' + x(r[0].t).toFixed(1) + ' ' + y(0) + ' Z';
      node.appendChild(svg('path', { d: area, 'class': 'area' }));
      node.appendChild(svg('path', { d: line, 'class': 'line' }));
    });
  }

  // ---- message rows -----------------------------------------------------

  function openOnActivate(tr, m) {
    tr.setAttribute('tabindex', '0');
    tr.setAttribute('data-message-id', m.message_id);
    tr.addEventListener('click', function () { openDetail(m.message_id); });
    tr.addEventListener('keydown', function (e) {
      if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); openDetail(m.message_id); }
    });
    return tr;
  }

  // ---- dead letters -----------------------------------------------------

  function loadDead(reset) {
    var f = state.dead;
    var keep = reset === false ? $('dead-table').tBodies[0].rows.length : 0;
    var limit = Math.min(500, Math.max(100, keep));
    api('GET', 'messages' + query({ status: 'dead', topic: f.topic, key: f.key, limit: limit }))
      .then(function (res) { renderDead(res, false); }, failed('Loading dead letters'));
  }

  function renderDead(res, more) {
    var body = $('dead-table').tBodies[0];
    if (!more) clear(body);
    var list = (res && res.messages) || [];
    list.forEach(function (m) {
      body.appendChild(openOnActivate(el('tr', null,
        el('td', { className: 'wrap', text: m.topic }),
        el('td', { className: 'wrap', text: m.business_key || '' }),
        el('td', { className: 'num', text: m.attempts + ' / ' + m.max_attempts }),
        el('td', { className: 'clip last-error', title: m.last_error || '', text: m.last_error || '' }),
        el('td', { className: 'clip mono payload-preview', title: m.payload_preview || '', text: m.payload_preview || '' }),
        el('td', { text: fmtTime(m.created_at) })), m));
    });
    state.dead.before = res ? res.next_before : null;
    $('dead-more').hidden = state.dead.before === null || state.dead.before === undefined;
    $('dead-empty').hidden = body.rows.length > 0;
    refreshed();
  }

  function loadMoreDead() {
    var f = state.dead;
    api('GET', 'messages' + query({ status: 'dead', topic: f.topic, key: f.key, limit: 100, before: f.before }))
      .then(function (res) { renderDead(res, true); }, failed('Loading dead letters'));
  }

  function deadFilter() {
    var filter = { status: 'dead' };
    if (state.dead.topic) filter.topic = state.dead.topic;
    if (state.dead.key) filter.key = state.dead.key;
    return filter;
  }

  // bulk asks the server how many dead letters the action would change (a
  // dry run), then asks the operator, then does it.
  function bulk(action) {
    var filter = deadFilter();
    var body = { filter: filter, dry_run: true };
    var scoped = !!(filter.topic || filter.key);
    if (!scoped) body.all = true;
    var verb = action === 'requeue' ? 'requeued' : 'discarded';
    api('POST', 'messages/' + action, body).then(function (res) {
      var n = res ? res.matched : 0;
      if (!n) { notice('No dead letters match, nothing to do.', true); return; }
      var scope = scoped ? ' (' + describeFilter(filter) + ')' : ' (every dead letter)';
      var text = fmtNum(n) + ' message' + (n === 1 ? '' : 's') + ' will be ' + verb + scope + ' — confirm?';
      return confirmAction(text, action === 'discard').then(function (ok) {
        if (!ok) return;
        delete body.dry_run;
        return api('POST', 'messages/' + action, body).then(function (done) {
          notice(fmtNum(done ? done.changed : 0) + ' message' + (done && done.changed === 1 ? '' : 's') + ' ' + verb + '.', true);
          loadDead(true);
        });
      });
    }).catch(failed(action === 'requeue' ? 'Requeue' : 'Discard'));
  }

  function describeFilter(f) {
    var parts = [];
    if (f.topic) parts.push('topic ' + f.topic);
    if (f.key) parts.push('key ' + f.key);
    return parts.join(', ');
  }

  // ---- search -----------------------------------------------------------

  function toRFC3339(local) {
    if (!local) return '';
    var d = new Date(local);
    return isNaN(d.getTime()) ? '' : d.toISOString();
  }

  function searchParams() {
    var f = $('search-form');
    return {
      status: f.status.value,
      topic: f.topic.value.trim(),
      key: f.key.value.trim(),
      id: f.id.value.trim(),
      since: toRFC3339(f.since.value),
      until: toRFC3339(f.until.value),
      limit: 50
    };
  }

  function loadSearch(fromNav) {
    if (fromNav === true && state.search.params) { runSearch(state.search.before); return; }
    if (fromNav === true) { state.search.params = searchParams(); state.search.history = []; runSearch(null); }
  }

  function runSearch(before) {
    var p = Object.assign({}, state.search.params, { before: before });
    api('GET', 'messages' + query(p)).then(function (res) {
      state.search.before = before;
      renderSearch(res);
    }, failed('Search'));
  }

  function renderSearch(res) {
    var body = $('search-table').tBodies[0];
    clear(body);
    var list = (res && res.messages) || [];
    list.forEach(function (m) {
      body.appendChild(openOnActivate(el('tr', null,
        el('td', { className: 'num', text: m.id }),
        el('td', { className: 'wrap', text: m.topic }),
        el('td', { className: 'wrap', text: m.business_key || '' }),
        el('td', { 'data-status': m.status }, badge(m.status)),
        el('td', { className: 'num', text: m.attempts }),
        el('td', { text: fmtTime(m.created_at) }),
        el('td', { className: 'clip last-error', title: m.last_error || '', text: m.last_error || '' }),
        el('td', { className: 'clip mono payload-preview', title: m.payload_preview || '', text: m.payload_preview || '' })), m));
    });
    $('search-empty').hidden = list.length > 0;
    state.search.next = res ? res.next_before : null;
    $('search-older').hidden = state.search.next === null || state.search.next === undefined;
    $('search-newer').hidden = state.search.history.length === 0;
    $('search-page').textContent = list.length ? 'page ' + (state.search.history.length + 1) : '';
    refreshed();
  }

  // ---- audit ------------------------------------------------------------

  function loadAudit() {
    api('GET', 'audit?limit=200').then(function (res) {
      var body = $('audit-table').tBodies[0];
      clear(body);
      var list = (res && res.entries) || [];
      list.forEach(function (e) {
        var target = typeof e.target === 'string' ? e.target : JSON.stringify(e.target);
        body.appendChild(el('tr', null,
          el('td', { text: fmtTime(e.at) }),
          el('td', { text: e.actor }),
          el('td', { text: e.action }),
          el('td', { className: 'wrap mono', text: target }),
          el('td', { className: 'num', text: fmtNum(e.count) })));
      });
      $('audit-empty').hidden = list.length > 0;
      refreshed();
    }, failed('Loading the audit log'));
  }

  // ---- detail -----------------------------------------------------------

  function openDialog(d) { if (!d.open) d.showModal(); }
  function closeDialog(d) { if (d.open) d.close(); }

  function openDetail(id) {
    api('GET', 'messages/' + encodeURIComponent(id)).then(function (m) {
      renderDetail(m);
      openDialog($('detail'));
      watchDetail();
    }, failed('Loading the message'));
  }

  // While a shown message is pending, it is reloaded to show the relay
  // delivering it.
  function watchDetail() {
    clearTimeout(state.detailTimer);
    var m = state.detail;
    if (!m || m.status !== 'pending' || !$('detail').open) return;
    state.detailTimer = setTimeout(function () {
      if (!$('detail').open || !state.detail || state.detail.message_id !== m.message_id) return;
      api('GET', 'messages/' + encodeURIComponent(m.message_id)).then(function (fresh) {
        if ($('detail').open && state.detail && state.detail.message_id === fresh.message_id) {
          renderDetail(fresh);
          watchDetail();
        }
      }, failed('Reloading the message'));
    }, 2000);
  }

  // prettyPayload is the payload as the detail shows it, and what kind it
  // is. The server describes a payload kept in a blob store (claim check)
  // and a sealed one it does not open instead of sending it.
  function prettyPayload(m) {
    var payload = m.payload === undefined || m.payload === null ? '' : String(m.payload);
    var headers = m.headers || {};
    if (m.claim_check) {
      var cc = m.claim_check;
      var lines = [payload];
      if (cc.sha256) lines.push('sha256 ' + cc.sha256);
      if (cc.error) lines.push(cc.error);
      return { kind: '(kept in a blob store, not shown here)', text: lines.join('\n') };
    }
    if (m.sealed && !m.sealed.opened) return { kind: '(sealed: ' + (m.sealed.reason || 'not opened') + ')', text: payload };
    if (m.sealed && m.sealed.encoding === 'base64') return { kind: '(opened, binary shown base64)', text: payload };
    if (headers['content-transfer-encoding'] === 'base64') return { kind: '(binary, stored base64)', text: payload };
    try {
      var v = JSON.parse(payload);
      if (v !== null && typeof v === 'object') return { kind: m.sealed ? '(opened, JSON)' : '(JSON)', text: JSON.stringify(v, null, 2) };
    } catch (e) { /* not JSON: shown as stored */ }
    return { kind: m.sealed ? '(opened)' : '', text: payload };
  }

  function renderDetail(m) {
    state.detail = m;
    $('detail-title').textContent = m.topic + (m.business_key ? ' · ' + m.business_key : '');
    var dl = $('detail-fields');
    clear(dl);
    var rows = [
      ['Message id', el('code', { text: m.message_id })],
      ['Row', m.id],
      ['Status', el('span', { id: 'detail-status', 'data-status': m.status }, badge(m.status))],
      ['Table status', m.table_status ? el('code', { id: 'detail-table-status', text: m.table_status }) : '–'],
      ['Topic', m.topic],
      ['Key', m.business_key || '–'],
      ['Attempts', m.attempts + ' of ' + m.max_attempts],
      ['Created', fmtTime(m.created_at)],
      ['Next attempt', m.status === 'pending' ? fmtTime(m.available_at) : '–'],
      ['Sent', fmtTime(m.sent_at)],
      ['Consumed', fmtTime(m.consumed_at)]
    ];
    rows.forEach(function (r) { dl.appendChild(el('dt', { text: r[0] })); dl.appendChild(el('dd', null, r[1])); });
    $('detail-last-error').textContent = m.last_error || '–';
    var hb = $('detail-headers').tBodies[0];
    clear(hb);
    var names = Object.keys(m.headers || {}).sort();
    names.forEach(function (k) {
      hb.appendChild(el('tr', null, el('th', { className: 'mono', text: k }), el('td', { className: 'wrap mono', text: m.headers[k] })));
    });
    var sealedHeaders = (m.sealed && m.sealed.headers) || {};
    Object.keys(sealedHeaders).sort().forEach(function (k) {
      hb.appendChild(el('tr', { className: 'sealed-header' }, el('th', { className: 'mono', text: k + ' (sealed)' }), el('td', { className: 'wrap mono', text: sealedHeaders[k] })));
    });
    if (!hb.rows.length) hb.appendChild(el('tr', null, el('td', { className: 'muted', text: 'none' })));
    var p = prettyPayload(m);
    $('detail-payload-kind').textContent = p.kind;
    $('detail-payload').textContent = p.text;
    $('detail-requeue').disabled = state.table ? m.status !== 'dead' : !(m.status === 'dead' || m.status === 'expired' || m.status === 'pending');
    $('detail-discard').disabled = !(m.status === 'dead' || m.status === 'expired');
    $('detail-consumed').disabled = m.status !== 'sent';
    $('detail-replay').disabled = !(m.status === 'sent' || m.status === 'consumed');
  }

  // clearDetail empties the closed detail, so that a payload opened for
  // one token does not stay in the document after it.
  function clearDetail() {
    ['detail-fields', 'detail-payload', 'detail-payload-kind', 'detail-last-error'].forEach(function (id) { clear($(id)); });
    clear($('detail-headers').tBodies[0]);
  }

  function detailAction(kind) {
    var m = state.detail;
    if (!m) return;
    var what = {
      requeue: { q: 'Requeue this message? It goes back to pending with its attempts reset and is delivered again.', method: 'POST', path: '/requeue', done: 'Requeued.', danger: false },
      discard: { q: 'Discard this dead message? It is deleted and cannot be brought back.', method: 'DELETE', path: '', done: 'Discarded.', danger: true },
      consumed: { q: 'Mark this message consumed?', method: 'POST', path: '/consumed', done: 'Marked consumed.', danger: false },
      replay: { q: 'Replay this message? It goes back to pending and is delivered again with the same message id (consumers that dedupe skip it).', method: 'POST', done: 'Replayed.', danger: false }
    }[kind];
    confirmAction(what.q, what.danger).then(function (ok) {
      if (!ok) return;
      var id = m.message_id;
      var call = kind === 'replay' ?
        api('POST', 'messages/replay', { filter: { ids: [id] } }) :
        api(what.method, 'messages/' + encodeURIComponent(id) + what.path);
      return call.then(function () {
        notice(what.done + ' ' + id, true);
        if (kind === 'discard') {
          closeDialog($('detail'));
        } else {
          return api('GET', 'messages/' + encodeURIComponent(id)).then(function (fresh) {
            renderDetail(fresh);
            watchDetail();
          });
        }
      }).then(function () { reloadLists(); });
    }).catch(failed({ requeue: 'Requeue', discard: 'Discard', consumed: 'Mark consumed', replay: 'Replay' }[kind]));
  }

  // replayMatching replays the sent and consumed messages the search form
  // selects: a dry run for the count, the operator's confirmation, then the
  // replay (confirming past the server's limit too).
  function replayMatching() {
    var p = searchParams();
    if (p.status && p.status !== 'sent' && p.status !== 'consumed') {
      notice('Only sent and consumed messages can be replayed; choose one of those statuses or any.', false);
      return;
    }
    var filter = {};
    ['status', 'topic', 'key', 'since', 'until'].forEach(function (k) { if (p[k]) filter[k] = p[k]; });
    if (p.id) filter.ids = [p.id];
    if (!Object.keys(filter).some(function (k) { return k !== 'status'; })) {
      notice('Narrow the search (topic, key, id or time) before replaying.', false);
      return;
    }
    var body = { filter: filter, dry_run: true };
    api('POST', 'messages/replay', body).then(function (res) {
      var n = res ? res.matched : 0;
      if (!n) { notice('No sent or consumed messages match, nothing to replay.', true); return; }
      var text = fmtNum(n) + ' delivered message' + (n === 1 ? '' : 's') + ' will be delivered again with the same message ids — confirm?';
      return confirmAction(text, n > 1000).then(function (ok) {
        if (!ok) return;
        delete body.dry_run;
        body.yes = true;
        return api('POST', 'messages/replay', body).then(function (done) {
          notice(fmtNum(done ? done.changed : 0) + ' message' + (done && done.changed === 1 ? '' : 's') + ' replayed.', true);
          if (state.search.params) runSearch(state.search.before);
        });
      });
    }).catch(failed('Replay'));
  }

  function reloadLists() {
    if (state.view === 'dead') loadDead(true);
    else if (state.view === 'search' && state.search.params) runSearch(state.search.before);
  }

  // confirmAction shows the confirmation dialog and resolves to true when the
  // operator confirms.
  function confirmAction(text, danger) {
    var d = $('confirm');
    $('confirm-text').textContent = text;
    $('confirm-ok').className = danger ? 'danger' : '';
    d.returnValue = '';
    return new Promise(function (resolve) {
      d.addEventListener('close', function onClose() {
        d.removeEventListener('close', onClose);
        resolve(d.returnValue === 'ok');
      });
      openDialog(d);
      $('confirm-cancel').focus();
    });
  }

  // ---- wiring -----------------------------------------------------------

  function init() {
    $('token-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var t = $('token-input').value.trim();
      if (!t) return;
      $('login-error').hidden = true;
      signIn(t);
    });
    $('signout').addEventListener('click', function () {
      state.token = '';
      state.signedIn = false;
      sessionStorage.removeItem(TOKEN_KEY);
      stopRefresh();
      showLogin('');
      $('login-message').textContent = 'The token was forgotten. Enter a token to continue.';
    });
    $('database').addEventListener('change', function () {
      location.href = '../' + encodeURIComponent($('database').value) + '/' + location.hash;
    });
    window.addEventListener('hashchange', route);
    document.addEventListener('visibilitychange', function () {
      if (!document.hidden && state.signedIn && state.view === 'overview') loadOverview(false);
    });

    $('dead-form').addEventListener('submit', function (e) {
      e.preventDefault();
      state.dead.topic = $('dead-topic').value.trim();
      state.dead.key = $('dead-key').value.trim();
      loadDead(true);
    });
    $('dead-more').addEventListener('click', loadMoreDead);
    $('dead-requeue-all').addEventListener('click', function () { bulk('requeue'); });
    $('dead-discard-all').addEventListener('click', function () { bulk('discard'); });

    $('search-form').addEventListener('submit', function (e) {
      e.preventDefault();
      state.search.params = searchParams();
      state.search.history = [];
      runSearch(null);
    });
    $('search-older').addEventListener('click', function () {
      state.search.history.push(state.search.before);
      runSearch(state.search.next);
    });
    $('search-newer').addEventListener('click', function () {
      runSearch(state.search.history.pop());
    });

    $('detail-close').addEventListener('click', function () { closeDialog($('detail')); });
    $('detail').addEventListener('close', function () { clearTimeout(state.detailTimer); state.detail = null; clearDetail(); });
    $('detail-requeue').addEventListener('click', function () { detailAction('requeue'); });
    $('detail-discard').addEventListener('click', function () { detailAction('discard'); });
    $('detail-consumed').addEventListener('click', function () { detailAction('consumed'); });
    $('detail-replay').addEventListener('click', function () { detailAction('replay'); });
    $('search-replay').addEventListener('click', replayMatching);

    route();
    // Try the stored token, or none: a server without tokens allows reads.
    signIn(state.token);
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
