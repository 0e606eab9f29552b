// End-to-end tests of user management in the console: the Users page
// (administrators only) and the Account page (each user's own password).
import { test } from "node:test";
import assert from "node:assert/strict";
import { EMAIL, startServer, apiClient, shots, newPage, signIn } from "./lib.mjs";

const ACCOUNT_DISABLED = "This account is disabled; ask an administrator to enable it";

/** Signs in through the API; the answer's tokens, or the error's status and message. */
async function apiSignIn(base, email, password) {
  const r = await fetch(`${base}/signin`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ email, password }),
  });
  return { status: r.status, body: await r.json() };
}

async function signInAs(page, base, email, password) {
  await page.goto(`${base}/ui/`);
  await page.fill("#email", email);
  await page.fill("#password", password);
  await page.click("button[type=submit]");
  await page.waitForSelector("header#top:not([hidden])");
}

/** The text of a user's row cells (E-mail, Name, Tenant, Role, State). */
async function userRow(page, email) {
  return page.$$eval(`tr[data-user="${email}"] td`, (tds) => tds.slice(0, 5).map((t) => t.textContent));
}

test("administrators create, disable, enable, promote, reset and delete users in the console", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 20]]);
  const page = await newPage();
  await signIn(page, server.base);
  assert.ok(await page.isVisible("nav a[data-page=users]"), "administrators see Users");
  await page.click("nav a[data-page=users]");
  await page.waitForSelector(`tr[data-user="${EMAIL}"]`);
  // One's own row offers nothing that could lock one out.
  assert.equal(await page.textContent(`tr[data-user="${EMAIL}"] .actions`), "you");

  // Create: a too-short password is refused with the server's words.
  await page.fill("#user-email", "bob@example.com");
  await page.fill("#user-name", "Bob");
  await page.fill("#user-password", "short");
  await page.click("#create-user button[type=submit]");
  await page.waitForSelector("#create-user-error:not([hidden])");
  assert.equal(await page.textContent("#create-user-error"), "password must be at least 8 characters");
  await page.fill("#user-password", "bob-password");
  await page.click("#create-user button[type=submit]");
  await page.waitForSelector('tr[data-user="bob@example.com"]');
  assert.equal(await page.textContent("#user-notice"), "Created user bob@example.com in tenant default.");
  assert.deepEqual(await userRow(page, "bob@example.com"), ["bob@example.com", "Bob", "default", "User", "Enabled"]);
  await shots(page, "users-01-list");

  // Disable: bob's live IdToken is refused at its next request.
  const bob = await apiSignIn(server.base, "bob@example.com", "bob-password");
  assert.equal(bob.status, 200);
  await page.click('tr[data-user="bob@example.com"] button.toggle-disabled');
  await page.waitForSelector('tr[data-user="bob@example.com"] .state-disabled');
  assert.equal(await page.textContent("#user-notice"),
    "Disabled bob@example.com: it cannot sign in, and its sessions have ended.");
  const refused = await fetch(`${server.base}/volumes`, { headers: { authorization: bob.body.IdToken } });
  assert.equal(refused.status, 401);
  assert.equal((await refused.json()).message, ACCOUNT_DISABLED);
  const again = await apiSignIn(server.base, "bob@example.com", "bob-password");
  assert.deepEqual([again.status, again.body.message], [403, ACCOUNT_DISABLED]);
  await shots(page, "users-02-disabled");

  await page.click('tr[data-user="bob@example.com"] button.toggle-disabled');
  await page.waitForSelector('tr[data-user="bob@example.com"] .state-enabled');
  assert.equal((await apiSignIn(server.base, "bob@example.com", "bob-password")).status, 200);

  // Roles.
  await page.click('tr[data-user="bob@example.com"] button.toggle-admin');
  await page.waitForFunction(() =>
    document.querySelector('tr[data-user="bob@example.com"] td[data-label=Role]')?.textContent === "Administrator");
  assert.equal(await page.textContent("#user-notice"), "bob@example.com is now an administrator.");
  await page.click('tr[data-user="bob@example.com"] button.toggle-admin');
  await page.waitForFunction(() =>
    document.querySelector('tr[data-user="bob@example.com"] td[data-label=Role]')?.textContent === "User");

  // Reset the password in a dialog: its error stays in the dialog.
  await page.click('tr[data-user="bob@example.com"] button.reset');
  await page.waitForSelector("#reset-dialog[open]");
  await page.fill("#reset-password", "short");
  await page.click("#reset-dialog-submit");
  await page.waitForSelector("#reset-dialog .error:not([hidden])");
  assert.equal(await page.textContent("#reset-dialog .error"), "password must be at least 8 characters");
  await shots(page, "users-03-reset");
  await page.fill("#reset-password", "bob-reset-password");
  await page.click("#reset-dialog-submit");
  await page.waitForSelector("#reset-dialog", { state: "detached" });
  assert.equal(await page.textContent("#user-notice"), "Password of bob@example.com reset; its sessions have ended.");
  assert.equal((await apiSignIn(server.base, "bob@example.com", "bob-password")).status, 401);
  assert.equal((await apiSignIn(server.base, "bob@example.com", "bob-reset-password")).status, 200);

  // Delete, confirmed (the page accepts confirm()).
  await page.click('tr[data-user="bob@example.com"] button.delete');
  await page.waitForSelector('tr[data-user="bob@example.com"]', { state: "detached" });
  assert.equal(await page.textContent("#user-notice"), "Deleted user bob@example.com.");
  assert.equal((await apiSignIn(server.base, "bob@example.com", "bob-reset-password")).status, 401);
  await page.context().close();
});

test("a user without the administrator role sees no Users page and changes its own password", async () => {
  const server = await startServer([["d1", "node-a", "zone-a", 20]]);
  const api = await apiClient(server.base);
  await api.call("POST", "/users", { email: "carol@example.com", password: "carol-password" });
  const page = await newPage();
  await signInAs(page, server.base, "carol@example.com", "carol-password");
  assert.equal(await page.isVisible("nav a[data-page=users]"), false, "Users is not offered");
  await page.goto(`${server.base}/ui/#/users`);
  await page.waitForSelector("main p.muted");
  assert.match(await page.textContent("main p.muted"), /Only administrators manage users/);

  await page.click("nav a[data-page=account]");
  await page.waitForSelector("#change-password");
  assert.match(await page.textContent("main"), /Signed in as carol@example\.com\./);
  const before = await page.evaluate(() => JSON.parse(sessionStorage.getItem("svs.session")).idToken);

  // A wrong current password: the server's words; a mismatch: caught here.
  await page.fill("#current-password", "not-my-password");
  await page.fill("#new-password", "carol-new-password");
  await page.fill("#repeat-password", "carol-new-password");
  await page.click("#change-password button[type=submit]");
  await page.waitForSelector("#password-error:not([hidden])");
  assert.equal(await page.textContent("#password-error"), "the current password is not correct");
  await page.fill("#current-password", "carol-password");
  await page.fill("#repeat-password", "carol-other-password");
  await page.click("#change-password button[type=submit]");
  await page.waitForFunction(() => document.querySelector("#password-error")?.textContent === "The new passwords do not match.");
  await shots(page, "users-04-account-error");

  await page.fill("#repeat-password", "carol-new-password");
  await page.click("#change-password button[type=submit]");
  await page.waitForSelector("#account-notice:not([hidden])");
  assert.equal(await page.textContent("#account-notice"),
    "Your password is changed. Your other sessions have ended; this one goes on.");
  await shots(page, "users-05-account-changed");
  // The console keeps the new session; the old IdToken is refused.
  const after = await page.evaluate(() => JSON.parse(sessionStorage.getItem("svs.session")).idToken);
  assert.notEqual(after, before);
  const old = await fetch(`${server.base}/volumes`, { headers: { authorization: before } });
  assert.equal(old.status, 401);
  await page.click("nav a[data-page=volumes]");
  await page.waitForSelector("main h1");
  assert.equal(await page.isVisible("header#top"), true, "still signed in");
  assert.equal((await apiSignIn(server.base, "carol@example.com", "carol-password")).status, 401);
  assert.equal((await apiSignIn(server.base, "carol@example.com", "carol-new-password")).status, 200);
  await page.context().close();
});
