// Renders the report's tables and transcripts from the embedded JSON, a page at a time.
// Run content is untrusted: it is only ever inserted with textContent, never as HTML.
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('pg-data').textContent);
  var trajs = data.trajectories, tasks = data.tasks, threshold = data.threshold;
  var PAGE = 25, TASK_PAGE = 50;
  var state = { outcome: 'all', query: '', page: 0, taskSort: 'task', taskPage: 0 };

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function num(v, d) {
    if (v === null || v === undefined) return '—';
    return typeof v === 'number' ? v.toFixed(d === undefined ? 3 : d) : String(v);
  }
  function outcome(t) {
    if (t.status === 'error') return 'error';
    if (t.verdict && t.verdict.status === 'error') return 'grader-error';
    if (t.reward === null || t.reward === undefined) return 'unscored';
    return t.reward >= threshold ? 'pass' : 'fail';
  }
  function pager(box, page, pages, total, what, go) {
    box.textContent = '';
    var prev = el('button', null, '‹ previous'), next = el('button', null, 'next ›');
    prev.disabled = page <= 0; next.disabled = page >= pages - 1;
    prev.addEventListener('click', function () { go(page - 1); });
    next.addEventListener('click', function () { go(page + 1); });
    box.append(prev, el('span', 'muted', 'page ' + (pages ? page + 1 : 0) + ' of ' + pages +
      ' · ' + total + ' ' + what), next);
  }

  // ---------------------------------------------------------------- tasks
  function taskRows() {
    var rows = tasks.slice();
    if (state.taskSort === 'worst') {
      rows.sort(function (a, b) { return (a.mean_reward === null ? -1 : a.mean_reward) -
        (b.mean_reward === null ? -1 : b.mean_reward); });
    } else if (state.taskSort === 'errors') {
      rows.sort(function (a, b) { return (b.verify_errors + b.episode_errors) -
        (a.verify_errors + a.episode_errors); });
    }
    return rows;
  }
  function renderTasks() {
    var rows = taskRows(), pages = Math.ceil(rows.length / TASK_PAGE);
    state.taskPage = Math.max(0, Math.min(state.taskPage, pages - 1));
    var body = document.querySelector('#task-table tbody');
    body.textContent = '';
    rows.slice(state.taskPage * TASK_PAGE, (state.taskPage + 1) * TASK_PAGE).forEach(function (r) {
      var tr = el('tr'), td = el('td'), link = el('button', 'linkish', r.task_id);
      link.title = 'show the transcripts of this task';
      link.addEventListener('click', function () {
        state.query = r.task_id; state.outcome = 'all'; state.page = 0;
        syncControls(); renderTrajs();
        document.getElementById('transcripts').scrollIntoView();
      });
      td.append(link); tr.append(td);
      [r.attempts, r.scored, r.successes, num(r.mean_reward), num(r.best_reward),
       r.verify_errors + r.episode_errors, r.truncated].forEach(function (v) {
        tr.append(el('td', 'num', v));
      });
      body.append(tr);
    });
    pager(document.getElementById('task-pager'), state.taskPage, pages, rows.length, 'tasks',
      function (p) { state.taskPage = p; renderTasks(); });
  }

  // --------------------------------------------------------- transcripts
  function filtered() {
    var q = state.query.trim().toLowerCase();
    return trajs.filter(function (t) {
      var o = outcome(t);
      if (state.outcome === 'truncated' ? t.end.indexOf('truncated') !== 0
          : state.outcome !== 'all' && o !== state.outcome) return false;
      return !q || t.id.toLowerCase().indexOf(q) >= 0 || t.task.toLowerCase().indexOf(q) >= 0;
    });
  }
  function msg(kind, who, text) {
    var box = el('div', 'msg ' + kind);
    box.append(el('div', 'who', who));
    if (text === '' || text === null || text === undefined) box.append(el('div', 'empty', '(empty)'));
    else box.append(el('pre', null, text));
    return box;
  }
  // Arguments as "name: value" lines; a multi-line string (code, a file) is shown as its text,
  // indented, instead of one long JSON string full of \n escapes.
  function prettyArgs(a) {
    var parsed;
    try { parsed = JSON.parse(a); } catch (e) { return a; }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      return JSON.stringify(parsed, null, 2);
    }
    return Object.keys(parsed).map(function (k) {
      var v = parsed[k];
      if (typeof v === 'string' && v.indexOf('\n') >= 0) {
        return k + ':\n' + v.split('\n').map(function (line) { return '    ' + line; }).join('\n');
      }
      return k + ': ' + JSON.stringify(v);
    }).join('\n') || '(no arguments)';
  }
  function kvTable(title, obj) {
    var keys = Object.keys(obj || {});
    if (!keys.length) return null;
    var table = el('table'), head = el('tr');
    head.append(el('th', null, title), el('th', 'num', 'value'));
    table.append(head);
    keys.forEach(function (k) {
      var tr = el('tr');
      tr.append(el('td', null, k), el('td', 'num', num(obj[k])));
      table.append(tr);
    });
    return table;
  }
  function renderTranscript(t, box) {
    var time = t.time || {};
    box.append(el('div', 'meta', 'attempt ' + String(t.attempt) + ' · seed ' + String(t.seed) +
      ' · ended: ' + t.end + ' · model ' + num(time.policy_s, 2) + ' s · tools ' +
      num(time.env_s, 2) + ' s · verify ' + num(time.verify_s, 2) + ' s'));
    box.append(msg('user', 'user · prompt', data.prompts[t.task]));
    t.steps.forEach(function (s) {
      if (s.k === 'call') {
        box.append(msg('call', 'assistant · tool call ' + s.n, prettyArgs(s.a)));
        if (s.t === 'tool_error') box.append(msg('toolerror', 'tool error · ' + (s.e || ''), s.o));
        else if (s.t === 'tool_output') box.append(msg('tool', 'tool output · ' + s.n, s.o));
        else box.append(msg('env', 'environment · the call was not run', s.o));
      } else {
        box.append(msg('assistant', 'assistant · ends turn', s.m));
        if (s.t === 'turn_transition') box.append(msg('user', 'environment reply', s.o));
        else if (s.o) box.append(msg('env', 'environment', s.o));
      }
      if (s.u) box.append(el('div', 'meta', 'usage ' + JSON.stringify(s.u)));
    });
    if (t.error) box.append(msg('error', 'episode error', t.error));
    var v = t.verdict, vb = el('div', 'verdict');
    if (!v) {
      vb.append(el('h4', null, 'no verdict'));
    } else {
      vb.append(el('h4', null, 'verdict · ' + v.status + (v.status === 'scored' ? ' · reward ' +
        num(v.reward) : '') + (v.grader ? ' · grader ' + v.grader : '')));
      if (v.error) vb.append(msg('error', 'grader says', v.error));
      if (v.reason) vb.append(msg('env', 'reason', v.reason));
      [kvTable('component', v.components), kvTable('metric', v.metrics)].forEach(function (tb) {
        if (tb) vb.append(tb);
      });
    }
    box.append(vb);
  }
  function item(t) {
    var d = el('details', 'traj'), s = el('summary'), o = outcome(t);
    d.id = 'traj-' + t.id;
    s.append(el('span', 'badge ' + o, o), el('span', 'sid', t.id),
      el('span', 'facts', 'reward ' + num(t.reward) + ' · ' + t.end + ' · ' + t.steps.length + ' steps'));
    d.append(s);
    d.addEventListener('toggle', function () {
      if (d.open && !d.dataset.rendered) {
        d.dataset.rendered = '1';
        var box = el('div', 'transcript');
        renderTranscript(t, box);
        d.append(box);
      }
    });
    return d;
  }
  function renderTrajs(openId) {
    var rows = filtered(), pages = Math.ceil(rows.length / PAGE);
    if (openId !== undefined) {
      var at = rows.findIndex(function (t) { return t.id === openId; });
      if (at >= 0) state.page = Math.floor(at / PAGE);
    }
    state.page = Math.max(0, Math.min(state.page, pages - 1));
    var list = document.getElementById('traj-list');
    list.textContent = '';
    var target = null;
    rows.slice(state.page * PAGE, (state.page + 1) * PAGE).forEach(function (t) {
      var d = item(t);
      list.append(d);
      if (t.id === openId) target = d;
    });
    if (!rows.length) list.append(el('p', 'muted', 'No transcript matches.'));
    pager(document.getElementById('traj-pager'), state.page, pages, rows.length, 'transcripts',
      function (p) { state.page = p; renderTrajs(); });
    if (target) { target.open = true; target.scrollIntoView(); }
  }
  var search, select, sortSel;
  function syncControls() { search.value = state.query; select.value = state.outcome; }
  function controls() {
    var box = document.getElementById('traj-controls');
    select = el('select');
    ['all', 'pass', 'fail', 'truncated', 'grader-error', 'error', 'unscored'].forEach(function (k) {
      var opt = el('option', null, k); opt.value = k; select.append(opt);
    });
    select.addEventListener('change', function () { state.outcome = select.value; state.page = 0; renderTrajs(); });
    search = el('input');
    search.type = 'search'; search.placeholder = 'filter by task or trajectory id';
    search.addEventListener('input', function () { state.query = search.value; state.page = 0; renderTrajs(); });
    box.append(el('span', 'muted', 'outcome'), select, search);
    var tbox = document.getElementById('task-controls');
    sortSel = el('select');
    [['task', 'run order'], ['worst', 'lowest mean reward first'], ['errors', 'most errors first']]
      .forEach(function (p) { var o = el('option', null, p[1]); o.value = p[0]; sortSel.append(o); });
    sortSel.addEventListener('change', function () { state.taskSort = sortSel.value; state.taskPage = 0; renderTasks(); });
    tbox.append(el('span', 'muted', 'sort'), sortSel);
  }
  function fromHash() {
    var m = /^#traj=(.+)$/.exec(location.hash);
    if (!m) return false;
    state.query = ''; state.outcome = 'all';
    syncControls();
    renderTrajs(decodeURIComponent(m[1]));
    return true;
  }
  controls();
  renderTasks();
  if (!fromHash()) renderTrajs();
  window.addEventListener('hashchange', fromHash);
})();
