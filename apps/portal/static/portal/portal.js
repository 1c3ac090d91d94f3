// The portal's progressive enhancement: every page works without it.
// - [data-refresh="N"]: the element is fetched again every N seconds and replaced in place
//   (the job page while the job runs); it stops once the new page has no data-refresh.
// - pre[data-follow]: a running task's log, followed live: the bytes after data-offset are
//   appended every two seconds until the server says the task attempt ended.
// - input[data-select-all]: ticks every checkbox named by its value.
(function () {
  "use strict";

  function refresh(element) {
    var seconds = parseInt(element.getAttribute("data-refresh"), 10);
    if (!(seconds > 0)) return;
    var id = element.id;
    window.setTimeout(function again() {
      if (document.activeElement && element.contains(document.activeElement) && document.activeElement.form) {
        window.setTimeout(again, seconds * 1000);  // someone is filling a form in it: later
        return;
      }
      fetch(window.location.href, { credentials: "same-origin", headers: { "X-Requested-With": "fetch" } })
        .then(function (response) { return response.ok ? response.text() : Promise.reject(response.status); })
        .then(function (html) {
          var fresh = new DOMParser().parseFromString(html, "text/html").getElementById(id);
          if (!fresh) return;
          element.replaceWith(fresh);
          element = fresh;
          var title = new DOMParser().parseFromString(html, "text/html").title;
          if (title) document.title = title;
          wire(fresh);
          if (fresh.hasAttribute("data-refresh")) window.setTimeout(again, seconds * 1000);
        })
        .catch(function () { window.setTimeout(again, seconds * 4000); });
    }, seconds * 1000);
  }

  function follow(pre) {
    var url = pre.getAttribute("data-follow");
    var offset = parseInt(pre.getAttribute("data-offset"), 10) || 0;
    var status = document.getElementById(pre.getAttribute("aria-describedby") || "");
    function tick() {
      var sep = url.indexOf("?") < 0 ? "?" : "&";
      fetch(url + sep + "offset=" + offset, { credentials: "same-origin" })
        .then(function (response) {
          if (!response.ok) return Promise.reject(response.status);
          var next = parseInt(response.headers.get("X-Log-Offset"), 10);
          var finished = response.headers.get("X-Log-Finished") === "1";
          return response.text().then(function (text) {
            var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
            if (text) pre.appendChild(document.createTextNode(text));
            if (atBottom) pre.scrollTop = pre.scrollHeight;
            if (next >= 0) offset = next;
            pre.setAttribute("data-offset", String(offset));
            if (finished && !text) {
              if (status) status.textContent = "The task attempt has ended: this is its whole log.";
              return;
            }
            window.setTimeout(tick, 2000);
          });
        })
        .catch(function () { window.setTimeout(tick, 5000); });
    }
    if (status) status.textContent = "Following: new lines appear as the task writes them.";
    tick();
  }

  function selectAll(box) {
    box.addEventListener("change", function () {
      var form = box.form;
      if (!form) return;
      Array.prototype.forEach.call(form.querySelectorAll('input[type="checkbox"][name="' + box.value + '"]'),
        function (other) { other.checked = box.checked; });
    });
  }

  function wire(root) {
    Array.prototype.forEach.call(root.querySelectorAll("input[data-select-all]"), selectAll);
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("[data-refresh]"), refresh);
    Array.prototype.forEach.call(document.querySelectorAll("pre[data-follow]"), follow);
    wire(document);
    // Scripts run: the no-script fallbacks (meta refresh) are not needed.
    document.documentElement.classList.add("js");
  });
})();
