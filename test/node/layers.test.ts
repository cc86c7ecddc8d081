/**
 * The source trees have layers: at no folder level do two parts import each
 * other, directly or round about — no folder of src/ reaches back into one
 * that reaches it, and no file of a folder into one that imports it. Each
 * part can then be read knowing only what lies below it, and a new capability
 * finds the floor it belongs on. There is no list of exceptions: a cycle is
 * mended by moving the shared piece below both, not by allowing it here.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { test } from 'node:test'
import { cyclesOf, type Import, importsUnder } from '../../support/import-graph.ts'

const ROOT = join(import.meta.dirname, '..', '..')

for (const tree of ['src', 'bridge/src', 'packages/contracts/src', 'packages/inbox/src']) {
  test(`${tree} has no import cycle at any folder level`, () => {
    const imports = importsUnder(join(ROOT, tree))
    // A reader that found nothing would pass any tree.
    assert.ok(imports.length > 0, `only ${imports.length} imports read under ${tree}`)
    const described = cyclesOf(imports).map(
      ({ folder, members, imports: closing }) =>
        `in ${folder}: ${members.join(' ⇄ ')}\n${closing.map((i: Import) => `    ${i.from} → ${i.to}`).join('\n')}`,
    )
    assert.deepEqual(described, [], `import cycles under ${tree}:\n${described.join('\n')}`)
  })
}

test('the cycle finder sees a cycle between folders and names the imports that close it', () => {
  const imports: Import[] = [
    { from: 'a/one.ts', to: 'b/two.ts' },
    { from: 'b/two.ts', to: 'c/three.ts' },
    { from: 'c/three.ts', to: 'a/four.ts' },
    { from: 'a/four.ts', to: 'a/one.ts' },
  ]
  const cycles = cyclesOf(imports)
  assert.deepEqual(
    cycles.map((cycle) => [cycle.folder, cycle.members]),
    [['.', ['a', 'b', 'c']]],
  )
  assert.deepEqual(cycles[0]?.imports.map((i) => i.from).sort(), ['a/one.ts', 'b/two.ts', 'c/three.ts'])
  // Inside a folder, files are the parts: one importing back is a cycle of that folder.
  assert.deepEqual(
    cyclesOf([...imports, { from: 'a/one.ts', to: 'a/four.ts' }]).map((cycle) => cycle.folder),
    ['.', 'a'],
  )
})
