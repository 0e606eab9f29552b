// The console's Nodes page (every node: hosts and storage nodes, their
// health and credentials) and one node's page (its media and the copies it
// holds). Kept apart from app.js, which routes to it.
import { api, isAdmin } from "./api.js";
import {
  h, errorBox, noticeBox, actionBox, stateTag, table, cell, fmtTime, copyField, changeDetector, livePoll, capacityBar, capacityLegend,
  pageTitle,
} from "./dom.js";
import { CAPACITY_PARTS, capacityParts, capacityText } from "./text.js";

const main = document.getElementById("main");

// The command line that runs a node's agent against this service.
const AGENT_CREDENTIAL_PATH = "/etc/svs/agent.credential";
function agentCommand(node, credentialFile = AGENT_CREDENTIAL_PATH) {
  return `svs agent --url ${location.origin} --node ${node} --credential-file ${credentialFile}`;
}


// Where a storage node keeps its credential and how it runs (docs/storage-nodes.md).
const STORAGE_CREDENTIAL_PATH = "/etc/svs/storage-node.credential";
const STORAGE_NODE_COMMAND = "svs storage-node --config /etc/svs/storage-node.toml";

// The credential a node needs: the role of the one it has (a host may run
// both a storage node and an agent on one), else a storage node's own, else
// the host agent's. Issuing another kind would revoke the one it runs with.
function credentialRole(n) {
  if (n.credentialrole) return n.credentialrole;
  return n.role === "storage" ? "storage" : "agent";
}

const ROLE_TITLES = { agent: "Agent", storage: "Storage", "agent+storage": "Agent and storage node" };

// A node's capacity (the sum of its media): a bar split into what slices,
// running jobs and snapshots hold and what is free, with the free GiB under
// it; "—" for a node without media.
function nodeCapacity(n, compact) {
  if (!n.size) return h("span", { class: "muted" }, "—");
  return h("span", { class: "node-capacity" },
    capacityBar(n.size, capacityParts(n), { title: capacityText(n), compact }),
    h("span", { class: "capacity-free muted" }, `${n.freesize} GiB free of ${n.size} GiB`));
}

// A storage node's last heartbeat; other nodes have none. `short`: only
// the time of day when it was today (the list is wide), the whole date on
// hover.
function heartbeat(n, short = false) {
  if (n.role !== "storage") return "—";
  if (!n.lastheartbeat) return "never";
  const d = new Date(n.lastheartbeat);
  if (!short || isNaN(d) || d.toDateString() !== new Date().toDateString()) return fmtTime(n.lastheartbeat);
  return h("span", { title: fmtTime(n.lastheartbeat) }, d.toLocaleTimeString());
}

// When the node was last heard of, for the list: a storage node's last
// heartbeat, a host's agent's last request ("no agent" without a credential).
function lastSeen(n) {
  if (n.role === "storage") return heartbeat(n, true);
  if (!n.agentcredential) return h("span", { class: "muted" }, "no agent");
  if (!n.agentseen) return "never";
  const d = new Date(n.agentseen);
  return d.toDateString() === new Date().toDateString()
    ? h("span", { title: fmtTime(n.agentseen) }, d.toLocaleTimeString())
    : fmtTime(n.agentseen);
}

// What the Nodes page shows once when it opens: the outcome of removing a
// node on its own page (which is gone with it).
let flash = "";

export function nodesPage() {
  const err = errorBox();
  const actionErr = actionBox();
  actionErr.id = "node-action-error";
  const note = noticeBox();
  note.id = "node-notice";
  note.show(flash);
  flash = "";
  const list = h("div", {}, h("p", { class: "muted" }, "Loading nodes…"));
  const admin = isAdmin();
  const addErr = errorBox();
  main.append(h("h1", {}, "Nodes"), err, actionErr, note, list);

  if (admin) {
    const name = h("input", { id: "node-name", required: true, maxlength: 63, pattern: "[A-Za-z0-9._\\-]+", placeholder: "host-7" });
    const address = h("input", { id: "node-address", required: true, placeholder: "10.0.0.7" });
    const zone = h("input", { id: "node-zone", placeholder: "(none)" });
    main.append(h("form", {
      class: "card inline-form",
      id: "add-node",
      onsubmit: async (ev) => {
        ev.preventDefault();
        addErr.show(null);
        startAction();
        const body = { name: name.value.trim(), address: address.value.trim() };
        if (zone.value.trim()) body.zone = zone.value.trim();
        try {
          const n = await api.post("/nodes", body);
          note.show(`Node ${n.name} added (address ${n.address}). Issue its agent credential on its page to run the agent on it.`);
          name.value = "";
          address.value = "";
          zone.value = "";
        } catch (e) {
          addErr.show(e);
        }
        shown.reset();
        load();
      },
    },
    h("h2", {}, "Add node"),
    h("div", { class: "fields" },
      h("label", {}, "Name", name),
      h("label", {}, "Address", address),
      h("label", {}, "Zone", zone),
      h("button", { type: "submit" }, "Add node"),
    ),
    h("p", { class: "hint" }, "A host that attaches volumes: its NBD connections come from this IP address."),
    addErr));
  }

  // A new action starts clean.
  function startAction() {
    actionErr.show(null);
    addErr.show(null);
    note.show(null);
  }

  const shown = changeDetector();
  async function load() {
    let nodes;
    try {
      nodes = await api.get("/nodes");
      err.show(null);
    } catch (e) {
      err.show(new Error(`Could not load nodes: ${e.message}`));
      return;
    }
    if (!shown.changed(nodes)) return;
    // Few columns, so that the table fits a 1280-px window: what tells nodes
    // apart and their health. The rest (credentials, slice address, who
    // manages the node) and the actions are on the node's page.
    const rows = nodes.map((n) =>
      h("tr", { "data-node": n.name },
        cell("Name", h("a", { href: `#/nodes/${encodeURIComponent(n.name)}`, class: "node-link" }, n.name)),
        cell("Role", h("span", { class: "role" }, n.role)),
        cell("State", h("span", { class: "node-state" }, stateTag(n.state))),
        cell("Zone", n.zone || "—"),
        cell("Address", n.address || "—"),
        cell("Media", n.mediacount),
        cell("Copies", h("span", { class: "copies" }, n.copiescount)),
        cell("Volumes", n.volumescount),
        cell("Capacity", nodeCapacity(n, true)),
        cell("Last seen", h("span", { class: "last-seen" }, lastSeen(n))),
      ),
    );
    const headers = ["Name", "Role", "State", "Zone", "Address", "Media", "Copies", "Volumes", "Capacity", "Last seen"];
    list.replaceChildren(table(headers, rows, "No nodes."), capacityLegend(CAPACITY_PARTS),
      h("p", { class: "hint" }, "Last seen: a storage node's last heartbeat, a host's agent's last request. " +
        "A node's credentials, slice address and who manages it are on its page."));
  }

  load();
  // Heartbeats, agents' requests and node states move on by themselves.
  livePoll(2000, () => true, load);
}

// #/nodes/<name>: one node (every fact of it, and for administrators its
// credential and removal), its media and (administrators) every copy of a
// slice its media hold, of every tenant, live.
export function nodePage([nodeName]) {
  const err = errorBox();
  err.id = "node-error";
  const actionErr = actionBox();
  actionErr.id = "node-action-error";
  const note = noticeBox();
  note.id = "node-notice";
  // A credential issued here: shown once, until dismissed or the page changes.
  const issued = h("div", { id: "node-credential", class: "card credential", hidden: true });
  const summary = h("div", { id: "node-summary", class: "card summary" }, h("p", { class: "muted" }, "Loading…"));
  const media = h("section", { id: "node-media" });
  const copies = h("section", { id: "node-copies" });
  const admin = isAdmin();
  main.append(
    ...pageTitle([["Nodes", "#/nodes"]], nodeName, `Node ${nodeName}`),
    err, actionErr, note, summary, issued, media, copies);
  const path = `/nodes/${encodeURIComponent(nodeName)}`;
  const shown = changeDetector();

  async function load() {
    let node, all, held;
    try {
      [node, all, held] = await Promise.all([
        api.get(path),
        api.get("/media"),
        // Only administrators may see every tenant's copies.
        admin ? api.get(`${path}/copies`) : Promise.resolve(null),
      ]);
      err.show(null);
    } catch (e) {
      if (e.status === 404) {
        if (shown.changed("gone")) {
          summary.replaceChildren(h("p", { id: "node-gone" }, `There is no node named "${nodeName}" (any more).`));
          media.replaceChildren();
          copies.replaceChildren();
        }
        return;
      }
      err.show(new Error(`Could not load node ${nodeName}: ${e.message}`));
      return;
    }
    const mine = all.filter((m) => m.node === nodeName);
    if (!shown.changed(node, mine, held)) return;
    renderSummary(node);
    renderMedia(mine);
    renderCopies(held);
  }

  function renderSummary(n) {
    const agentSeen = n.agentseen ? fmtTime(n.agentseen) : "never";
    summary.replaceChildren(h("dl", { class: "facts" },
      h("dt", {}, "Role"), h("dd", { id: "node-role" }, n.role),
      h("dt", {}, "State"), h("dd", { id: "node-state" }, stateTag(n.state)),
      n.role === "storage"
        ? [h("dt", {}, "Last heartbeat"), h("dd", { id: "node-heartbeat" }, heartbeat(n)),
          h("dt", {}, "Slice address"), h("dd", {}, h("code", { id: "node-slice-address" }, n.sliceaddress || "—"))]
        : null,
      h("dt", {}, "Zone"), h("dd", { id: "node-zone" }, n.zone || "—"),
      h("dt", {}, "Address"), h("dd", { id: "node-address" }, n.address || "—"),
      h("dt", {}, "Credential"), h("dd", { id: "node-credential-state" },
        h("span", { class: n.agentcredential ? "agent yes" : "agent no" }, n.agentcredential ? `yes (${credentialRole(n)})` : "none")),
      h("dt", {}, "Agent seen"), h("dd", { id: "node-agent-seen" }, agentSeen),
      h("dt", {}, "Managed by"), h("dd", { id: "node-managed-by" }, n.managedby === "api" ? "API" : "configuration file"),
      h("dt", {}, "Media"), h("dd", {}, n.mediacount),
      h("dt", {}, "Copies"), h("dd", { id: "node-copies-count" }, n.copiescount),
      h("dt", {}, "Volumes"), h("dd", {}, n.volumescount),
      h("dt", {}, "Capacity"), h("dd", { id: "node-capacity" }, n.size
        ? [capacityBar(n.size, capacityParts(n), { title: capacityText(n) }), h("span", { class: "capacity-text" }, capacityText(n))]
        : "— (no media)"),
    ),
    admin
      ? h("div", { class: "actions", id: "node-actions" },
        h("button", { type: "button", class: "secondary issue", onclick: () => issue(n) }, `Issue ${credentialRole(n)} credential`),
        n.agentcredential
          ? h("button", { type: "button", class: "danger revoke", onclick: () => revoke(n) }, "Revoke credential")
          : null,
        // Nodes of the configuration file are removed there.
        n.managedby === "api"
          ? h("button", { type: "button", class: "danger remove", onclick: () => remove(n) }, "Remove node")
          : h("span", { class: "muted" }, "Removed in the configuration file."))
      : null);
  }

  // A new action starts clean, and a credential shown before is gone.
  function startAction() {
    actionErr.show(null);
    note.show(null);
    issued.hidden = true;
    issued.replaceChildren();
  }

  async function issue(n) {
    const role = credentialRole(n);
    if (n.agentcredential && !confirm(`Issue a new ${role} credential for node ${n.name}? The one it has stops working at once.`)) return;
    startAction();
    try {
      const c = await api.post(`/nodes/${encodeURIComponent(n.name)}/credentials`, role === "agent" ? {} : { role });
      const howTo = {
        storage: [h("p", {}, `Save it on the storage host in ${STORAGE_CREDENTIAL_PATH} (mode 0600); the storage node's configuration names it (credential_file), then run there:`),
          copyField("agent-command", STORAGE_NODE_COMMAND)],
        agent: [h("p", {}, `Save it on the host in ${AGENT_CREDENTIAL_PATH} (mode 0600), then run the agent there:`),
          copyField("agent-command", agentCommand(c.node))],
        "agent+storage": [h("p", {}, `Save it on the host in ${STORAGE_CREDENTIAL_PATH} (mode 0600); the storage node's configuration names it (credential_file), then run the storage node and the agent there:`),
          copyField("storage-node-command", STORAGE_NODE_COMMAND),
          copyField("agent-command", agentCommand(c.node, STORAGE_CREDENTIAL_PATH))],
      }[role];
      issued.replaceChildren(
        h("h2", {}, `${ROLE_TITLES[role] || role} credential of node ${c.node}`),
        h("p", {}, "Shown only this once: copy it now. Issuing another one revokes it."),
        copyField("credential-value", c.credential),
        ...howTo,
        h("div", { class: "buttons" },
          h("button", { type: "button", class: "secondary", id: "credential-done", onclick: () => { issued.hidden = true; issued.replaceChildren(); } }, "Done")),
      );
      issued.hidden = false;
    } catch (e) {
      actionErr.show(new Error(`Could not issue a credential for ${n.name}: ${e.message}`));
    }
    shown.reset();
    load();
  }

  async function revoke(n) {
    if (!confirm(`Revoke the ${credentialRole(n)} credential of node ${n.name}? Its ${{ agent: "agent", storage: "storage node", "agent+storage": "agent and storage node" }[credentialRole(n)] || "agent"} is refused from its next request.`)) return;
    startAction();
    try {
      await api.del(`/nodes/${encodeURIComponent(n.name)}/credentials`);
      note.show(`The ${credentialRole(n)} credential of node ${n.name} is revoked.`);
    } catch (e) {
      actionErr.show(new Error(`Could not revoke the credential of ${n.name}: ${e.message}`));
    }
    shown.reset();
    load();
  }

  // Removed: back to the list, which says so.
  async function remove(n) {
    if (!confirm(`Remove node ${n.name}? Its agent credential is revoked with it.`)) return;
    startAction();
    try {
      await api.del(`/nodes/${encodeURIComponent(n.name)}`);
      flash = `Node ${n.name} removed.`;
      location.hash = "#/nodes";
      return;
    } catch (e) {
      actionErr.show(new Error(`Could not remove node ${n.name}: ${e.message}`));
    }
    shown.reset();
    load();
  }

  function renderMedia(mine) {
    const rows = mine.map((m) => h("tr", { "data-medium": m.mediaid },
      cell("Medium", m.mediaid),
      cell("State", stateTag(m.state)),
      cell("Size", `${m.size} GiB`),
      cell("Free", `${m.freesize} GiB`),
      cell("Directory", h("code", {}, m.media || "—")),
      cell("Capacity", m.size ? capacityBar(m.size, capacityParts(m), { title: capacityText(m), compact: true }) : "—"),
    ));
    media.replaceChildren(h("h2", {}, "Media"), table(["Medium", "State", "Size", "Free", "Directory", "Capacity"], rows, "No media."),
      ...(rows.length ? [capacityLegend(CAPACITY_PARTS)] : []));
  }

  function renderCopies(held) {
    if (!held) {
      copies.replaceChildren(h("h2", {}, "Copies"), h("p", { class: "muted" }, "Only administrators see the copies a node holds."));
      return;
    }
    const rows = [...held]
      .sort((a, b) => a.volumename.localeCompare(b.volumename) || a.copy - b.copy || a.column - b.column)
      .map((c) => h("tr", { "data-copy": `${c.volumename}/c${c.copy}-k${c.column}` },
        cell("Volume", h("a", { href: `#/volumes/${encodeURIComponent(c.volumename)}`, title: c.volumeid }, c.volumename)),
        cell("Slice", h("code", {}, `c${c.copy}-k${c.column}`)),
        cell("Medium", c.media),
        cell("Size", `${c.size} GiB`),
        cell("State", h("span", { class: "copy-state" }, stateTag(c.state))),
      ));
    copies.replaceChildren(
      h("h2", {}, "Copies"),
      h("p", { class: "hint" }, "Every copy of a slice on this node's media. A Lost copy missed writes: it is never read again, and a recovery rebuilds it elsewhere."),
      table(["Volume", "Slice", "Medium", "Size", "State"], rows, "No copies on this node."));
  }

  load();
  livePoll(2000, () => true, load);
}
