// The submit page without a round trip: the YAML is checked as it is typed (the server's
// check, the same as Submit's), and an error's line is selected in the editor when clicked.
// Everything works without this script, through the Check button.
(function () {
  var editor = document.getElementById("id_yaml");
  var results = document.getElementById("results");
  var form = document.getElementById("submit-form");
  if (!editor || !results || !form || !window.fetch || !window.FormData) return;
  var url = editor.dataset.checkUrl;
  var token = form.querySelector("input[name=csrfmiddlewaretoken]").value;
  var timer = null, sent = 0;

  function selectLine(line) {
    var lines = editor.value.split("\n");
    if (line < 1 || line > lines.length) return;
    var start = 0;
    for (var i = 0; i < line - 1; i++) start += lines[i].length + 1;
    editor.focus();
    editor.setSelectionRange(start, start + lines[line - 1].length);
    var lineHeight = parseFloat(getComputedStyle(editor).lineHeight) || 16;
    editor.scrollTop = Math.max(0, (line - 3) * lineHeight);
  }

  function item(problem) {
    var li = document.createElement("li");
    li.dataset.path = problem.path;
    if (problem.path) {
      var code = document.createElement("code");
      code.className = "path";
      code.textContent = problem.path;
      li.appendChild(code);
      li.appendChild(document.createTextNode(": "));
    }
    li.appendChild(document.createTextNode(problem.message));
    if (problem.line) {
      li.dataset.line = problem.line;
      var a = document.createElement("a");
      a.href = "#id_yaml";
      a.textContent = " (line " + problem.line + ")";
      li.appendChild(a);
    }
    return li;
  }

  function list(title, id, kind, problems) {
    var h = document.createElement("h3");
    h.textContent = title;
    var ul = document.createElement("ul");
    ul.id = id;
    ul.className = "problems " + kind;
    problems.forEach(function (p) { ul.appendChild(item(p)); });
    return [h, ul];
  }

  function show(answer) {
    var nodes = [];
    if (answer.errors.length) {
      nodes = nodes.concat(list("Errors", "errors", "errors", answer.errors));
    } else {
      var ok = document.createElement("p");
      ok.className = "ok";
      ok.id = "check-ok";
      ok.textContent = "No errors: the job can be submitted.";
      nodes.push(ok);
    }
    if (answer.warnings.length) nodes = nodes.concat(list("Warnings", "warnings", "warnings", answer.warnings));
    results.replaceChildren.apply(results, nodes);
  }

  function check() {
    var mine = ++sent;
    var body = new FormData();
    body.append("yaml", editor.value);
    fetch(url, {method: "POST", body: body, credentials: "same-origin", headers: {"X-CSRFToken": token}})
      .then(function (r) { return r.json(); })
      .then(function (answer) { if (mine === sent) show(answer); })
      .catch(function () { /* the Check button still works */ });
  }

  editor.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(check, 600);
  });
  results.addEventListener("click", function (event) {
    var li = event.target.closest("li[data-line]");
    if (!li) return;
    event.preventDefault();
    selectLine(parseInt(li.dataset.line, 10));
  });
})();
