// The time zone the request context names is read from the system where it can be (without
// ICU's data, which the first use of `Intl` loads), and must be the name `Intl` gives: checked
// here for every zone file the system has, and for the zone the system is set to.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import fs from 'node:fs'

const module = new URL('../cli/request-context.mjs', import.meta.url).href
const ZONEINFO = '/usr/share/zoneinfo'
const noZoneFiles = process.platform === 'win32' || !fs.existsSync(ZONEINFO)

/** Runs `body` (an ES module's text, with `systemTimeZone` imported) in a node of its own; its JSON output. */
function child(body, env = {}) {
  const source = `import { systemTimeZone } from ${JSON.stringify(module)}\n${body}`
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', source], { encoding: 'utf8', env: { ...process.env, ...env } })
  assert.equal(r.status, 0, r.stderr)
  return JSON.parse(r.stdout)
}

test('every zone file of the system: TZ read without Intl names the zone as Intl does, or is left to Intl', { skip: noZoneFiles && 'no zoneinfo folder' }, () => {
  // Node applies a TZ set at run time to Intl at once, so one process goes through them all.
  const { zones, plain, read, differing } = child(`
    import fs from 'node:fs'
    import path from 'node:path'
    const zones = []
    const walk = (dir) => {
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const file = path.join(dir, entry.name)
        if (entry.isDirectory()) walk(file)
        else zones.push(path.relative(${JSON.stringify(ZONEINFO)}, file))
      }
    }
    walk(${JSON.stringify(ZONEINFO)})
    let read = 0
    const differing = []
    // posix/ and right/ repeat the zones (with or without leap seconds): left to Intl.
    const plain = zones.filter((name) => !name.startsWith('posix/') && !name.startsWith('right/')).length
    for (const name of zones) {
      for (const tz of [name, ':' + name]) {
        process.env.TZ = tz
        const ours = systemTimeZone(process.env)
        if (ours === undefined) continue
        read++
        const intl = Intl.DateTimeFormat().resolvedOptions().timeZone
        // Newer ICU (Node 22) calls GMT an offset, '+00:00', which names no zone: UTC is sent.
        const utcAsOffset = ours === 'UTC' && intl === '+00:00'
        if (ours !== intl && !utcAsOffset) differing.push({ tz, ours, intl })
      }
    }
    process.stdout.write(JSON.stringify({ zones: zones.length, plain, read, differing }))
  `)
  assert.deepEqual(differing, [])
  // Most zones are read without Intl (three quarters of them with tzdata 2025b).
  assert.ok(read > plain, `${read} of ${plain * 2} TZ values (of ${zones} zone files) read without Intl`)
})

test('TZ values that are no zone name are left to Intl', () => {
  const { answers } = child(`
    const answers = ['EST5EDT', 'CET-1CEST,M3.5.0,M10.5.0/3', '', '/etc/localtime', 'Nowhere/Land', 'posix/Europe/Paris', '../../etc/passwd', 'US/Eastern', 'Asia/Kolkata']
      .map((tz) => systemTimeZone({ TZ: tz }) ?? null)
    process.stdout.write(JSON.stringify({ answers }))
  `)
  assert.deepEqual(answers, answers.map(() => null))
})

test('without TZ: the zone /etc/localtime links to, as Intl names it', { skip: process.platform === 'win32' && 'no /etc/localtime' }, () => {
  const env = { ...process.env }
  delete env.TZ
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', `
    import { systemTimeZone } from ${JSON.stringify(module)}
    process.stdout.write(JSON.stringify({ ours: systemTimeZone(process.env) ?? null, intl: Intl.DateTimeFormat().resolvedOptions().timeZone }))
  `], { encoding: 'utf8', env })
  assert.equal(r.status, 0, r.stderr)
  const { ours, intl } = JSON.parse(r.stdout)
  if (ours !== null) assert.equal(ours, intl)
})
