// Drives the console in a real browser (Debian's chromium, headless) as an on-call engineer
// would: sign in, follow each counter to its list, open an unknown notification and read its
// evidence, resolve it with a note and go on to the next item, close a dead letter, resolve
// many exactly as previewed, and a list chosen in the queue, each item with its own outcome. Evidence holding markup must show as text and run nothing.
// Then the routes page: a reviewer sees how each stands, an admin pauses a route with a note
// and resumes it. Last, the one-click unsubscribe page a digest email links to.
// Run by tests/console.rs with BASE, TOKEN, ADMIN (a token with the admin scope, of the tenant that operates `mail`), ID (the hostile unknown webhook), EMAILS (unknown
// emails), TEXTS (dead letters on route `texts`), UNSUBSCRIBE (a digest email's link, on BASE)
// and SHOTS in the environment; playwright-core
// comes from NODE_PATH (.ci/run installs it).
const { chromium } = require('playwright-core');

function check(condition, what) {
  if (!condition) throw new Error(what);
}

// The ids of the notifications the queue table lists.
async function listed(page) {
  if ((await page.$('#queue')) === null) return [];
  return page.$$eval('#queue a[href^="/console/notifications/"]',
    (links) => links.map((a) => a.getAttribute('href').split('/').pop()));
}

(async () => {
  const { BASE, TOKEN, ADMIN, ID, SHOTS, UNSUBSCRIBE } = process.env;
  const EMAILS = process.env.EMAILS.split(',');
  const TEXTS = process.env.TEXTS.split(',');
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const dialogs = [];
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('dialog', async (dialog) => { dialogs.push(dialog.message()); await dialog.dismiss(); });

    await page.goto(`${BASE}/console`);
    check(page.url().endsWith('/console/login'), `not sent to sign in: ${page.url()}`);
    check((await page.$('header form')) === null && (await page.$('header a')) === null,
      'no navigation and no "Sign out" before anyone signs in');
    await page.fill('#token', 'wrong-token');
    await page.click('button[type=submit]');
    check((await page.textContent('[role=alert]')).includes('not valid'), 'a wrong token is refused');
    await page.fill('#token', TOKEN);
    await page.click('button[type=submit]');
    await page.waitForSelector('#queue');

    // The default view is everything that needs a person: the unknowns and the dead letters.
    const everything = await listed(page);
    for (const id of [ID, ...EMAILS, ...TEXTS]) {
      check(everything.includes(id), `${id} is not in the default view: ${everything}`);
    }
    const queueText = await page.textContent('#queue');
    check(queueText.includes('1 ambiguous attempt that'), `a count reads as words: ${queueText}`);
    check(!queueText.includes('attempt(s)'), `no "attempt(s)": ${queueText}`);
    const replays = await page.textContent('#replays b');
    check(!replays.includes('-0'), `no negative zero: ${replays}`);
    const backlog = await page.textContent('#backlog b');
    check(/^\d+$/.test(backlog), `the backlog is a whole number: ${backlog}`);
    await page.screenshot({ path: `${SHOTS}/console-queue.png`, fullPage: true });

    // Every counter leads to its list: the route's count is the length of the list it opens,
    // and so is each reason's.
    const routeLink = page.locator('#by-route a', { hasText: 'texts' });
    const routeCount = Number((await routeLink.textContent()).trim().split(/\s+/).pop());
    check(routeCount === TEXTS.length, `texts counts ${routeCount}`);
    await routeLink.click();
    await page.waitForSelector('#queue');
    const onRoute = await listed(page);
    check(onRoute.length === routeCount && TEXTS.every((id) => onRoute.includes(id)),
      `the texts link shows its ${routeCount}: ${onRoute}`);
    await page.goto(`${BASE}/console`);
    const counters = await page.$$eval('a.card, #ages a', (links) => links.map((a) => ({
      href: a.getAttribute('href'), count: Number(a.querySelector('b').textContent),
    })));
    check(counters.length === 9, `six reasons and three ages: ${JSON.stringify(counters)}`);
    for (const { href, count } of counters) {
      await page.goto(`${BASE}${href}`);
      const shown = await listed(page);
      check(shown.length === count, `${href} counts ${count} and lists ${shown.length}`);
    }

    // An unknown email: what it said, to look for in the vendor's log.
    await page.goto(`${BASE}/console/notifications/${EMAILS[0]}`);
    check((await page.textContent('#subject')).includes('Your export is ready'), 'the subject is shown');
    check((await page.textContent('#text')).includes('https://example.com/exports/42'), 'the text is shown');
    check((await page.textContent('#cancellation-key')) === 'exports/ada@example.com', 'the cancellation key is shown');
    check((await page.textContent('#expires-at')) === '2999-01-01T00:00:00Z', 'the expiry is shown');
    const attached = await page.textContent('#attachments');
    check(attached.includes('<img src=x onerror=alert(3)>.txt') && attached.includes('5 bytes'),
      `the attachment is shown by name, as text: ${attached}`);
    check((await page.$$('#attachments img')).length === 0, 'no markup from a filename');

    await page.goto(`${BASE}/console`);
    await page.click(`a[href="/console/notifications/${ID}"]`);
    await page.waitForSelector('#resolve');
    const evidence = await page.textContent('pre.evidence');
    // Shown as the stored JSON: the markup is there, as text, quotes escaped by JSON.
    check(evidence.includes('<script>alert(\\"xss\\")</script>'), `the evidence shows as text: ${evidence}`);
    check(evidence.includes('<img src=x onerror=alert(2)>'), 'the attribute breaker shows as text');
    check((await page.$$('pre.evidence img, script:not([src])')).length === 0, 'no markup from evidence');
    check((await page.textContent('#receipts')).includes('No delivery report'), 'no receipt yet, and it says so');
    // Nothing is chosen for the person: the first choice is a prompt, and choices are words.
    check((await page.$eval('#action', (s) => s.value)) === '', 'no outcome is preselected');
    const choices = await page.$$eval('#action option', (os) => os.map((o) => o.textContent));
    check(choices.every((c) => !/[+_]/.test(c)), `choices are words: ${choices}`);
    await page.screenshot({ path: `${SHOTS}/console-notification.png`, fullPage: true });

    await page.selectOption('#action', 'not_delivered+close');
    await page.fill('#note', 'The receiver logged a 500 and dropped it: nothing was delivered.');
    await page.click('#resolve button[type=submit]');
    await page.waitForSelector('[role=status]');
    check((await page.textContent('[role=status]')).includes(ID), 'the resolution is confirmed');
    check(!(await listed(page)).includes(ID), 'the item left the queue');
    await page.screenshot({ path: `${SHOTS}/console-resolved.png`, fullPage: true });
    // On to the next item, straight from the confirmation.
    const next = await page.getAttribute('#next', 'href');
    check(next && !next.endsWith(ID), `a next item: ${next}`);
    await page.click('#next');
    await page.waitForSelector('#resolve');

    await page.goto(`${BASE}/console/notifications/${ID}`);
    check((await page.textContent('#state')).includes('failed / known'), 'the notification is failed/known');

    // A dead letter whose message no longer matters is closed: it leaves the queue.
    await page.goto(`${BASE}/console/notifications/${TEXTS[0]}`);
    await page.selectOption('#action', 'not_delivered+close');
    await page.fill('#note', 'The one-time code it carried has expired.');
    await page.click('#resolve button[type=submit]');
    await page.waitForSelector('[role=status]');
    check(!(await listed(page)).includes(TEXTS[0]), 'the closed dead letter left the queue');

    // Many at once: preview, then confirm exactly what was previewed.
    await page.goto(`${BASE}/console/bulk`);
    check((await page.$eval('#action', (s) => s.value)) === '', 'no outcome is preselected');
    const bulkChoices = await page.$$eval('#bulk option', (os) => os.map((o) => o.textContent));
    check(bulkChoices.every((c) => !/[+_]/.test(c)), `choices are words: ${bulkChoices}`);
    await page.selectOption('#reason', 'unknown');
    await page.selectOption('#action', 'delivered');
    await page.click('#bulk button[type=submit]');
    await page.waitForSelector('#preview');
    const preview = await page.textContent('#preview');
    for (const to of ['ada@example.com', 'grace@example.com']) {
      check(preview.includes(to), `the preview names ${to}: ${preview}`);
    }
    check(preview.includes('ambiguous'), `the preview says why: ${preview}`);
    check((await page.$$('#preview tbody tr')).length === EMAILS.length, 'one row per email');
    await page.screenshot({ path: `${SHOTS}/console-bulk.png`, fullPage: true });

    // The choice changes after the preview: the confirmation is refused, nothing changes.
    await page.selectOption('#action', 'not_delivered+close');
    await page.fill('#note', 'Changed my mind after the preview.');
    await page.click('#confirm');
    await page.waitForSelector('[role=alert]');
    check((await page.textContent('[role=alert]')).includes('outcome changed'), 'the changed outcome is refused');
    check((await page.$('#confirm')) === null, 'a new preview is needed');

    await page.selectOption('#action', 'delivered');
    await page.click('#bulk button[type=submit]');
    await page.waitForSelector('#confirm');
    await page.fill('#note', "Both are in the vendor's log.");
    await page.click('#confirm');
    await page.waitForSelector('[role=status]');
    check((await page.textContent('[role=status]')).includes(`Resolved ${EMAILS.length}`), 'both resolved');

    // A list, each item with its own outcome (what the vendor's log said of each): chosen in
    // the queue, previewed with what will be done to each, then confirmed with a note.
    await page.goto(`${BASE}/console?route=texts`);
    await page.waitForSelector('#queue');
    await page.selectOption(`select[name="pick:${TEXTS[1]}"]`, 'not_delivered+close');
    await page.click('#choose button[type=submit]');
    await page.waitForSelector('#preview');
    const chosen = await page.$$eval('#preview .resolution', (cells) => cells.map((c) => c.textContent));
    check(chosen.length === 1 && chosen[0].includes('close it'), `one row, as chosen: ${chosen}`);
    await page.screenshot({ path: `${SHOTS}/console-list.png`, fullPage: true });
    await page.fill('#note', 'Its code expired; the vendor never had it.');
    await page.click('#confirm');
    await page.waitForSelector('[role=status]');
    check((await page.textContent('[role=status]')).includes('Resolved 1'), 'the chosen one resolved');

    // The routes: a reviewer sees them, and no form that would pause one.
    await page.click('a[href="/console/routes"]');
    await page.waitForSelector('#routes');
    check((await page.textContent('#route-mail')).includes('not paused'), 'mail is not paused');
    check((await page.$$('form.pause, form.resume')).length === 0, 'a reviewer has no pause button');
    check((await page.textContent('main')).includes('operate'), 'it says who may pause');

    // An admin pauses `mail` in every process, with a note, and resumes it.
    await page.click('header button');
    await page.waitForSelector('#token');
    await page.fill('#token', ADMIN);
    await page.click('button[type=submit]');
    await page.waitForSelector('#queue');
    await page.goto(`${BASE}/console/routes`);
    await page.click('#route-mail form.pause button[type=submit]');
    check(page.url().endsWith('/console/routes'), 'the browser asks for the note before posting');
    await page.fill('#pause-note-mail', 'The vendor double-sends <b>INC-42</b>');
    await page.click('#route-mail form.pause button[type=submit]');
    await page.waitForSelector('[role=status]');
    check((await page.textContent('[role=status]')).includes('mail paused'), 'the pause is confirmed');
    const paused = await page.textContent('#route-mail .paused');
    check(paused.includes('acme-admin') && paused.includes('The vendor double-sends <b>INC-42</b>')
      && paused.includes('its work waiting'), `who paused it and why, as text: ${paused}`);
    check((await page.$$('#route-mail .paused b')).length === 1, 'no markup from the note');
    await page.screenshot({ path: `${SHOTS}/console-routes.png`, fullPage: true });
    await page.fill('#resume-note-mail', 'INC-42 is over');
    await page.click('#route-mail form.resume button[type=submit]');
    await page.waitForSelector('[role=status]');
    check((await page.textContent('[role=status]')).includes('mail resumed'), 'the resume is confirmed');
    check((await page.textContent('#route-mail')).includes('not paused'), 'mail sends again');

    // The unsubscribe link of a digest email, as its recipient follows it: a question that
    // changes nothing, then the button that sends RFC 8058's one-click POST.
    const reader = await browser.newPage({ viewport: { width: 800, height: 400 } });
    await reader.goto(UNSUBSCRIBE);
    const question = await reader.textContent('body');
    check(question.includes('Stop sending digest messages to ada@example.com?'), `the question: ${question}`);
    await reader.screenshot({ path: `${SHOTS}/unsubscribe.png`, fullPage: true });
    await reader.click('#unsubscribe');
    await reader.waitForSelector('#done');
    check((await reader.textContent('#done')).includes('no more digest messages'), 'unsubscribed');
    await reader.screenshot({ path: `${SHOTS}/unsubscribe-done.png`, fullPage: true });

    check(dialogs.length === 0, `a script ran: ${dialogs.join(', ')}`);
    console.log('ok');
  } finally {
    await browser.close();
  }
})().catch((err) => {
  console.error(err.stack || String(err));
  process.exit(1);
});
