/**
 * Every item of docs/conformance.md is named by at least one test, in one form: the word
 * "conformance", a space, and one or more item ids separated by commas, inside the title of
 * the test (or describe) that checks the item. For example a test titled
 * `'conformance D14: ensureValid fails ...'` or `'... (conformance S3, S31, S32)'`.
 *
 * This file reads the lists (each section's "Items X1–Xn" line and its numbered entries) and
 * every .ts file under test/, and fails on: an item no test names, a tag naming an item that
 * does not exist, a tag in another shape (a range, "and"), a tag in a comment instead of a
 * title, and a title in the old bare form ("(S3, S31)", "S6: ...").
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { repoRoot } from '../helpers.js';

/** This file: its comments show the form, so it is not scanned for tags. */
const SELF = 'test/docs/conformance-tags.test.ts';

/**
 * Items that no test checks, each with the reason. An item here must not be tagged (so the
 * entry goes once a test names it); items the list itself marks "Not applicable" need no entry.
 */
const UNCHECKED: Readonly<Record<string, string>> = {
  R18:
    "only 'one status per operation' is checked (region.test.ts, 'batch reports a status per " +
    "operation'); nothing checks waiting for the first lock, trying the others, or mini-batches",
};

interface Item {
  readonly id: string;
  /** The entry's text, continuation lines included. */
  readonly text: string;
}

interface Section {
  readonly heading: string;
  readonly letter: string;
  /** n of the "Items X1–Xn" line. */
  readonly declared: number;
  readonly items: readonly Item[];
}

/** An item the list itself marks "Not applicable" (its words may wrap over two lines). */
const notApplicable = (item: Item) => /\bNot\s+applicable\b/.test(item.text);

/** The sections of docs/conformance.md: each `## ` heading with its Items line and entries. */
function readSections(): Section[] {
  const lines = readFileSync(join(repoRoot, 'docs/conformance.md'), 'utf8').split('\n');
  const sections: Section[] = [];
  let current: { heading: string; itemsLines: string[]; entries: string[][] } | undefined;
  const close = () => {
    if (current === undefined) return;
    const { heading, itemsLines, entries } = current;
    assert.equal(itemsLines.length, 1, `"${heading}": one "Items X1–Xn" line, got ${itemsLines}`);
    const m = /^Items ([A-Z])1[–-]([A-Z])(\d+)\b/.exec(itemsLines[0] as string);
    assert.ok(m, `"${heading}": cannot read "${itemsLines[0]}" as "Items X1–Xn"`);
    const [, letter, again, n] = m as unknown as [string, string, string, string];
    assert.equal(again, letter, `"${heading}": "${itemsLines[0]}" mixes two letters`);
    const numbers = entries.map((e) => Number(/^(\d+)\./.exec(e[0] as string)?.[1]));
    assert.deepEqual(
      numbers,
      numbers.map((_, i) => i + 1),
      `"${heading}": the entries are not numbered 1, 2, 3, ...`,
    );
    sections.push({
      heading,
      letter,
      declared: Number(n),
      items: entries.map((e, i) => ({ id: `${letter}${i + 1}`, text: e.join('\n') })),
    });
  };
  for (const line of lines) {
    if (line.startsWith('## ')) {
      close();
      current = { heading: line.slice(3).trim(), itemsLines: [], entries: [] };
    } else if (current === undefined) {
      // The introduction, before the first section.
    } else if (line.startsWith('Items ')) {
      current.itemsLines.push(line);
    } else if (/^\d+\. /.test(line)) {
      current.entries.push([line]);
    } else if (/^\s+\S/.test(line) && current.entries.length > 0) {
      current.entries.at(-1)?.push(line);
    }
  }
  close();
  return sections;
}

/** Every .ts file under test/, but this one, as [path relative to the repository, text]. */
function testFiles(): [string, string][] {
  const files: [string, string][] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts')) {
        const name = relative(repoRoot, path);
        if (name !== SELF) files.push([name, readFileSync(path, 'utf8')]);
      }
    }
  };
  walk(join(repoRoot, 'test'));
  return files.sort(([a], [b]) => a.localeCompare(b));
}

interface Tag {
  readonly where: string;
  readonly ids: readonly string[];
  /** On a comment line (`//`, `/*`, or inside a block comment): not a title. */
  readonly inComment: boolean;
  /** Followed by a range or "and" instead of more comma-separated ids. */
  readonly malformed: boolean;
}

/** The tag form: "conformance " and ids separated by commas. */
const TAG = /\bconformance ([A-Z]\d+(?:, [A-Z]\d+)*)/g;
/** What may not follow a tag: a range ("D1-D6", "D1–D6"), "and", "+", "&", or a bare number. */
const BAD_CONTINUATION = /^(?:\s*[-–+&]\s*[A-Z]?\d|\s+and\s+[A-Z]?\d|,\s*\d)/;

function tagsOf(file: string, text: string): Tag[] {
  const tags: Tag[] = [];
  let inBlock = false;
  for (const [index, line] of text.split('\n').entries()) {
    const trimmed = line.trim();
    const inComment = inBlock || trimmed.startsWith('//') || trimmed.startsWith('/*');
    if (inBlock) inBlock = !line.includes('*/');
    else if (trimmed.startsWith('/*')) inBlock = !trimmed.includes('*/');
    for (const m of line.matchAll(TAG)) {
      const rest = line.slice((m.index ?? 0) + m[0].length);
      tags.push({
        where: `${file}:${index + 1}`,
        ids: (m[1] as string).split(', '),
        inComment,
        malformed: BAD_CONTINUATION.test(rest),
      });
    }
  }
  return tags;
}

/** The first argument of describe/it/test when it is a string literal (any quote). */
const TITLE =
  /\b(?:describe|it|test)(?:\.(?:only|skip|todo))?\(\s*(?:'((?:\\.|[^'\\])*)'|"((?:\\.|[^"\\])*)"|`((?:\\.|[^`\\])*)`)/g;
/** The old bare forms, once the tags are taken out: "(S3", "(S3, S31)" or a leading "S6:". */
const OLD_FORM = /\(\s*[DRSVM]\d{1,2}\b|^\s*[DRSVM]\d{1,2}\s*(?:[:+,]|and\b)/;

function oldFormTitles(file: string, text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(TITLE)) {
    const title = m[1] ?? m[2] ?? m[3] ?? '';
    if (OLD_FORM.test(title.replace(TAG, ''))) {
      const line = text.slice(0, m.index).split('\n').length;
      found.push(`${file}:${line}: ${title}`);
    }
  }
  return found;
}

describe('docs/conformance.md: every item is named by a test', () => {
  it('each section declares its items ("Items X1–Xn") and has exactly n numbered entries', () => {
    const sections = readSections();
    assert.ok(sections.length > 0, 'no section in docs/conformance.md');
    for (const s of sections) {
      assert.equal(
        s.items.length,
        s.declared,
        `"${s.heading}" declares ${s.letter}1–${s.letter}${s.declared} but has ${s.items.length} numbered entries`,
      );
    }
    const letters = sections.map((s) => s.letter);
    assert.equal(new Set(letters).size, letters.length, `a letter used twice: ${letters}`);
  });

  it('every tag is "conformance " with comma-separated ids of existing items, in a title', () => {
    const items = new Map(readSections().flatMap((s) => s.items.map((i) => [i.id, i] as const)));
    const problems: string[] = [];
    for (const [file, text] of testFiles()) {
      for (const tag of tagsOf(file, text)) {
        if (tag.malformed)
          problems.push(`${tag.where}: write ids separated by commas, not a range or "and"`);
        if (tag.inComment)
          problems.push(`${tag.where}: a tag in a comment: put it in the test's title`);
        for (const id of tag.ids) {
          const item = items.get(id);
          if (item === undefined) problems.push(`${tag.where}: ${id} is no item of the lists`);
          else if (notApplicable(item))
            problems.push(`${tag.where}: ${id} is marked "Not applicable" in the list`);
        }
      }
    }
    assert.deepEqual(problems, []);
  });

  it('no test title uses the old bare form ("(S3, S31)", "S6: ...")', () => {
    const found = testFiles().flatMap(([file, text]) => oldFormTitles(file, text));
    assert.deepEqual(found, [], 'write "conformance S3, S31" instead');
  });

  it('every item is named by at least one test', () => {
    const named = new Set(
      testFiles().flatMap(([file, text]) =>
        tagsOf(file, text)
          .filter((t) => !t.inComment)
          .flatMap((t) => t.ids),
      ),
    );
    const items = readSections().flatMap((s) => s.items);
    const ids = new Set(items.map((i) => i.id));
    for (const id of Object.keys(UNCHECKED)) {
      assert.ok(ids.has(id), `UNCHECKED names ${id}, which is no item of the lists`);
      assert.ok(!named.has(id), `${id} is named by a test now: remove it from UNCHECKED`);
    }
    const missing = items
      .filter((i) => !named.has(i.id))
      .filter((i) => !notApplicable(i) && UNCHECKED[i.id] === undefined)
      .map((i) => i.id);
    assert.deepEqual(missing, [], `items no test names: ${missing.join(', ')}`);
  });
});
