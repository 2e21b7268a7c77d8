/** What every benchmark is: an id (`P3`), what it measures, and a run that reports figures. */
export interface BenchOptions {
  /** Reduced sizes (`--quick`): the whole suite in under two minutes. */
  quick: boolean;
  /** A fresh temp dir for this benchmark's data; removed afterwards. */
  tmp: string;
}

/** One table of figures: the first column names the row. */
export interface BenchTable {
  caption?: string;
  columns: string[];
  rows: string[][];
}

export interface BenchReport {
  id: string;
  title: string;
  /** Sizes used in this run (they differ with --quick). */
  sizes: string;
  tables: BenchTable[];
  /** One line per finding: the headline ratio, caveats, what the numbers mean. */
  notes: string[];
  /** Set when the benchmark could not run (e.g. no single executable): the reason. */
  skipped?: string;
  seconds: number;
}

export interface Benchmark {
  id: string;
  title: string;
  /** One sentence for the README: what is measured against what. */
  measures: string;
  run(options: BenchOptions): Promise<Omit<BenchReport, 'id' | 'title' | 'seconds'>>;
}
