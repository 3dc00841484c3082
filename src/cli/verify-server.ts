// Placeholder until this subcommand lands (work in progress this session).
export async function run(_args: string[]): Promise<number> {
  process.stderr.write('not implemented yet\n');
  return 2;
}
