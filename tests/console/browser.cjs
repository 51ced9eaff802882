// Drives the console in a real browser (Debian's chromium, headless) as an on-call engineer
// would: sign in, open an unknown notification, read its evidence, resolve it with a note, and
// see it leave the queue. Evidence holding markup must show as text and run nothing.
// Run by tests/console.rs with BASE, TOKEN, ID and SHOTS in the environment; playwright-core
// comes from NODE_PATH (.ci/run installs it).
const { chromium } = require('playwright-core');

function check(condition, what) {
  if (!condition) throw new Error(what);
}

(async () => {
  const { BASE, TOKEN, ID, SHOTS } = process.env;
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
    await page.fill('#token', 'wrong-token');
    await page.click('button[type=submit]');
    check((await page.textContent('[role=alert]')).includes('not valid'), 'a wrong token is refused');
    await page.fill('#token', TOKEN);
    await page.click('button[type=submit]');
    await page.waitForSelector('#queue');
    await page.screenshot({ path: `${SHOTS}/console-queue.png`, fullPage: true });

    await page.click(`a[href="/console/notifications/${ID}"]`);
    await page.waitForSelector('#resolve');
    const evidence = await page.textContent('pre.evidence');
    // Shown as the stored JSON: the markup is there, as text, quotes escaped by JSON.
    check(evidence.includes('<script>alert(\\"xss\\")</script>'), `the evidence shows as text: ${evidence}`);
    check(evidence.includes('<img src=x onerror=alert(2)>'), 'the attribute breaker shows as text');
    check((await page.$$('pre.evidence img, script:not([src])')).length === 0, 'no markup from evidence');
    check((await page.textContent('#receipts')).includes('No delivery report'), 'no receipt yet, and it says so');
    await page.screenshot({ path: `${SHOTS}/console-notification.png`, fullPage: true });

    // The note is required: the browser refuses an empty one before anything is sent.
    await page.selectOption('#action', 'not_delivered+close');
    await page.fill('#note', 'The receiver logged a 500 and dropped it: nothing was delivered.');
    await page.click('#resolve button[type=submit]');
    await page.waitForSelector('[role=status]');
    check((await page.textContent('[role=status]')).includes(ID), 'the resolution is confirmed');
    check((await page.$('#empty')) !== null, 'the item left the queue');
    await page.screenshot({ path: `${SHOTS}/console-resolved.png`, fullPage: true });

    await page.goto(`${BASE}/console/notifications/${ID}`);
    check((await page.textContent('#state')).includes('failed / known'), 'the notification is failed/known');
    check(dialogs.length === 0, `a script ran: ${dialogs.join(', ')}`);
    console.log('ok');
  } finally {
    await browser.close();
  }
})().catch((err) => {
  console.error(err.stack || String(err));
  process.exit(1);
});
