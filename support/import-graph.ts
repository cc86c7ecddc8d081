/**
 * The import graph of a source tree, read from the code itself (TypeScript's
 * own pre-processor, so `import type`, re-exports and dynamic imports count),
 * and the cycles of it at every folder level: in each folder, its files and
 * subfolders are the nodes, and an import from anything inside one of them to
 * anything inside another is an edge. A tree whose every level is free of
 * cycles has layers: each folder can be read knowing only what it imports.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import ts from 'typescript'

/** One import of one file by another, both relative to the tree's root. */
export type Import = { from: string; to: string }

/** A cycle among the children of one folder, with the imports that close it. */
export type Cycle = { folder: string; members: string[]; imports: Import[] }

const SOURCE = /\.tsx?$/

function sourcesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sourcesUnder(path)
    return SOURCE.test(name) && !name.endsWith('.d.ts') ? [path] : []
  })
}

/** The file a relative specifier names, as the bundler resolves it (`.ts` written out, or a folder's index). */
function resolveSpecifier(fromFile: string, specifier: string): string | undefined {
  const base = resolve(dirname(fromFile), specifier)
  const candidates = [base, `${base}.ts`, `${base}.tsx`, join(base, 'index.ts')]
  return candidates.find((path) => existsSync(path) && statSync(path).isFile())
}

/** Every relative import between the source files under `root` (paths relative to `root`). */
export function importsUnder(root: string): Import[] {
  const imports: Import[] = []
  for (const file of sourcesUnder(root)) {
    const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, true)
    for (const { fileName } of importedFiles) {
      if (!fileName.startsWith('.')) continue
      const target = resolveSpecifier(file, fileName)
      // Outside the tree (examples/, a package): not a layer of it.
      if (!target || relative(root, target).startsWith('..')) continue
      if (!SOURCE.test(target)) continue
      imports.push({ from: relative(root, file), to: relative(root, target) })
    }
  }
  return imports
}

/** The child of `folder` (a file or a subfolder) that holds `path`, or undefined for a path outside it. */
function childOf(folder: string, path: string): string | undefined {
  const prefix = folder === '' ? '' : `${folder}${sep}`
  if (!path.startsWith(prefix)) return undefined
  const [first] = path.slice(prefix.length).split(sep)
  return first === undefined ? undefined : prefix + first
}

/** Strongly connected components of more than one node (Tarjan). */
function components(nodes: Iterable<string>, edges: ReadonlyMap<string, ReadonlySet<string>>): string[][] {
  let next = 0
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: string[] = []
  const onStack = new Set<string>()
  const found: string[][] = []
  const visit = (node: string): void => {
    index.set(node, next)
    low.set(node, next)
    next++
    stack.push(node)
    onStack.add(node)
    for (const target of edges.get(node) ?? []) {
      if (!index.has(target)) {
        visit(target)
        low.set(node, Math.min(low.get(node) as number, low.get(target) as number))
      } else if (onStack.has(target)) {
        low.set(node, Math.min(low.get(node) as number, index.get(target) as number))
      }
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = []
      let member: string | undefined
      do {
        member = stack.pop() as string
        onStack.delete(member)
        component.push(member)
      } while (member !== node)
      if (component.length > 1) found.push(component.sort())
    }
  }
  for (const node of nodes) if (!index.has(node)) visit(node)
  return found
}

/** The cycles of the tree at every folder level, each with the imports that close it. */
export function cyclesOf(imports: readonly Import[]): Cycle[] {
  const folders = new Set([''])
  for (const { from, to } of imports) {
    for (const path of [from, to]) {
      for (let dir = dirname(path); dir !== '.'; dir = dirname(dir)) folders.add(dir)
    }
  }
  const cycles: Cycle[] = []
  for (const folder of [...folders].sort()) {
    const edges = new Map<string, Set<string>>()
    const between = new Map<string, Import[]>()
    for (const entry of imports) {
      const a = childOf(folder, entry.from)
      const b = childOf(folder, entry.to)
      if (a === undefined || b === undefined || a === b) continue
      edges.set(a, (edges.get(a) ?? new Set()).add(b))
      const key = `${a}\n${b}`
      between.set(key, [...(between.get(key) ?? []), entry])
    }
    for (const members of components(edges.keys(), edges)) {
      const inside = new Set(members)
      const closing = [...between].filter(([key]) => key.split('\n').every((end) => inside.has(end)))
      cycles.push({ folder: folder || '.', members, imports: closing.flatMap(([, entries]) => entries) })
    }
  }
  return cycles
}
