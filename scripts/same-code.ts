/**
 * Whether two versions of a TypeScript source hold the same code at the same places: every token
 * (identifier, keyword, literal, punctuation) equal and at the same line and column, comments and
 * JSDoc ignored (but not a shebang, merge-conflict markers, or a `Stryker disable` comment, which
 * changes the mutants). Mutants are made of code at positions (Stryker never mutates a comment), so a
 * mutation result measured on one version holds for the other, survivors' line numbers included.
 * Used by scripts/mutation-report.ts (a row is not marked "source changed" for a comment edit)
 * and scripts/lib-mutations.ts (a rerun keeps the results of a file whose comments alone changed).
 */
import ts from 'typescript'

/** The code tokens of a source, each as `line:column:text` (0-based), comments and JSDoc left out. */
export function codeTokens(fileName: string, text: string): string[] {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS)
  const tokens: string[] = []
  const visit = (node: ts.Node): void => {
    // A JSDoc comment is a child of the node it documents (the language service's getChildren);
    // JSDoc-style types written in code (`?string`) are other node kinds, and are kept.
    if (node.kind === ts.SyntaxKind.JSDoc) return
    const children = node.getChildren(sf)
    if (children.length === 0) {
      if (node.kind === ts.SyntaxKind.EndOfFileToken) return
      const start = node.getStart(sf)
      const { line, character } = sf.getLineAndCharacterOfPosition(start)
      tokens.push(`${line}:${character}:${text.slice(start, node.getEnd())}`)
      return
    }
    for (const child of children) visit(child)
  }
  visit(sf)
  // Trivia that is not a comment (a shebang line, merge-conflict markers) and comments that change
  // what Stryker mutates (`// Stryker disable …`) count as code.
  for (const [index, line] of text.split('\n').entries()) {
    if ((index === 0 && line.startsWith('#!')) || /^(<{7}|={7}|>{7}|\|{7})/.test(line) || /Stryker (disable|restore)/.test(line)) tokens.push(`${index}:trivia:${line}`)
  }
  return tokens
}

/** True when `a` and `b` differ at most in comments and in whitespace that moves no token. */
export function sameCode(fileName: string, a: string, b: string): boolean {
  if (a === b) return true
  const x = codeTokens(fileName, a)
  const y = codeTokens(fileName, b)
  return x.length === y.length && x.every((token, i) => token === y[i])
}
