"""The en texts: what the zh table (the seeds') says, in English.

Same keys and `{placeholders}` as flower.core.texts.zh (a test checks). The headings the
prompts ask for are the documents' English ones (flower.core.document.Section.en), which the
parsers read as well as the Chinese.
"""

EN: dict[str, str] = {
    # -- the roles' rule texts (flower.core.roles) ---------------------------------------
    "rules.coordinator": """\
You are the coordinator: you split the task, hand out the work, read the reports and \
decide, but you never do the work yourself.
- Changing files and running commands go to subagents through the Agent tool; Bash, Write \
and Edit on the main thread are blocked.
- A subagent sees neither your system prompt nor the workbench index: its task description \
is all it knows. Every task description states the goal, the acceptance criteria, where the \
workbench is (copy the path from "The workbench is at …" in the system prompt), and "output \
longer than 2000 characters goes into the workbench's artifacts/; the reply gives only the \
path and the conclusion".
- When a subagent reports back, check it against the acceptance criteria; if it falls \
short, say exactly what is missing and send it again.
- Have subagents write key decisions into the workbench's notes/, one file per decision.""",
    "rules.worker": """\
You are the worker: finish the job the task description gives you.
- First read the goal and the acceptance criteria of the task; when done, check each one.
- Output longer than 2000 characters (reports, data, logs) goes into the workbench's \
artifacts/ folder named in the task description; the reply gives only the path and the \
conclusion.
- Your last reply is your report to the coordinator: what you did, where the result is, \
whether the acceptance criteria are met, what is still open.
- If you are stuck, say where and what you tried; never make up results.""",
    "rules.clarify": """\
You are the clarifier: before any work starts, make the request clear. You only ask and \
read; you change nothing.
- First read the files of the workspace that concern the request; do not ask a person what \
you can find out yourself.
- What really needs a person's decision, ask with the question tool: one thing at a time, \
with options where you can.
- When nobody answers, take a reasonable assumption by your own judgement and write it under \
"Unknowns"; do not ask again.
- At the end output only the four sections below, the headings exactly as written, each on \
its own line, no code block, nothing else:
{brief}
- "Goal": one or two sentences; "Acceptance": each item checkable; "Bounds": what is not to \
be done; "Unknowns": the points still uncertain and the assumptions you took ("none" if \
there are none).""",
    "rules.judge": """\
You are the judge: you rule independently against the frozen goal and do nobody's work. You \
only read (and run commands to check, where allowed); you change no file.
- First find out what environment you are in: the platform, what can run, what cannot.
- When setting the goal, output only the two sections below, the headings exactly as \
written, each on its own line, no code block:
{goal}
  "Checks": one per line, starting with -, each checkable on its own; a check that cannot \
be verified in this environment starts with [unverifiable here: why].
- When ruling, output only the three sections below, the headings exactly as written, each \
on its own line, no code block:
{verdict}
  "Verdict": one word only, one of achieved, not achieved, unreachable. When in doubt it is \
not achieved; only when the environment cannot verify it at all is it unreachable. \
"Reason": what the ruling rests on; "Failed checks": every check that did not pass (each \
starting with -).
- Never rule achieved because it "looks about right": every check needs evidence.""",
    "rules.oracle": """\
You answer side questions: the run is still going and someone asks how it is doing. You \
only read, never write.
- Look at the workbench's INDEX.md, notes/ and artifacts/ first; read specific files when \
needed.
- Answer briefly and concretely: how far it got, and which file says so; if unsure, say so.
- Your answer does not enter the run's context; do not give the running agents \
instructions.""",
    "role.this": "This role",
    "role.oracle": "side questions",
    "role.coordinator": "coordinator",
    "role.coder": "implementer: changes the code as the task says and verifies it",
    "role.coder_prompt": (
        "You implement. Verify after every change; do not save it all for the end."
    ),
    # -- the starter flow (flower.workflow.starter) --------------------------------------
    "starter.clarify": (
        "This is what a person asked for. First clarify it into a four-section brief:\n\n{ask}"
    ),
    "starter.clarify_resume": (
        "Go on clarifying. Once it is clear, output the final brief in the four sections asked for."
    ),
    "starter.goal": "From the frozen brief below, set the goal and its checklist:\n\n{brief}",
    "starter.verify": (
        "Rule independently whether this round's work achieved the frozen goal. Check the "
        "workspace yourself; do not just trust the report.\n\n"
        "{goal}\n\n<round report>\n{report}\n</round report>"
    ),
    "starter.review_note": (
        "\n\nThis run's work is on the branch {branch}; the workspace itself is not changed. "
        "The branch's latest state is checked out at {path}: check it there."
    ),
    "starter.work": "Do the work the frozen brief and goal below describe.\n\n{brief}\n\n{goal}",
    "starter.wake": (
        "When waking this run, the person added:\n\n{said}\n\nThe brief and the goal have been "
        "updated from it; go on working by the new criteria."
    ),
    "starter.carry_on": (
        "[flower was stopped and started again: carry on where the work stands; what was "
        "reported done is done.]"
    ),
    "starter.carry_on_added": "What the person has added to the brief:\n{said}",
    "starter.wake_label": "added on waking",
    "starter.ambiguous": "The judge gave no conclusion that could be read: taken as not achieved.",
    "starter.accept": "Accept this result and go on",
    "starter.amend": "Change the goal",
    "starter.retry": "Your ruling is wrong, keep working",
    "starter.no_ask": "no ask: say what you want done, e.g. flower 'make me an X'",
    "starter.unverifiable": "{count}/{total} checks cannot be verified in this environment",
    "starter.no_runtime": "no Runtime to rule on the goal with",
    "starter.unreachable": "The judge says the goal cannot be reached: {reason}\nWhat now?",
    "starter.no_reason": "(no reason given)",
    "starter.unreachable_unanswered": "the goal was ruled unreachable and nobody answered",
    "starter.new_goal": "What is the new goal? (It goes into the goal file and is judged by.)",
    "starter.no_new_goal": "the goal was to be changed, but nobody gave a new one",
    "starter.human_said": "{reason}\nThe person says: {answer}",
    # -- the human channel (flower.core.human) -------------------------------------------
    "human.timeout": (
        "Nobody answered. Go on by your own judgement, and write this question and the "
        'assumption you took under "Unknowns". Do not ask again, and do not stop here.'
    ),
    "human.over_budget": (
        "No questions are left; this one was not sent to a person. Go on by your own "
        'judgement, and write this question and the assumption you took under "Unknowns". '
        "Do not ask again, and do not stop here."
    ),
    "human.declined": (
        "The person does not answer this question. Go on by your own judgement, and write "
        'this question and the assumption you took under "Unknowns". Do not ask again, and '
        "do not stop here."
    ),
    "human.declined_reason": "{declined}\nThey said: {reason}",
    "human.invalid": (
        "The question was empty and was not sent. To ask, write a concrete question (options "
        "welcome); otherwise go on by your own judgement."
    ),
    "human.empty_inbox": (
        "The inbox is empty: no new message from the person. Go on with your work."
    ),
    "human.new_mail": "{count} new message(s) from the person (now marked read):\n",
    "human.ask_tool": (
        "Ask the person one question and wait for the answer (the call waits until it is "
        "answered, declined or timed out). Ask only what you cannot decide yourself and whose "
        "answer changes what you do; give options when you can. If nobody answers you get a "
        "note: do as it says."
    ),
    "human.inbox_tool": (
        "Read the messages the person sent on their own (does not wait; with none it returns "
        "a note at once). Look at the start of every phase and before finishing: the person "
        "may have added to or changed the request."
    ),
    "human.question_field": "The question, said in one sentence",
    "human.options_field": "Possible answers",
    "human.added": "added by the person",
    "human.amend_line": "{label} ({stamp}):",
    "log.title": "# Questions and answers\n",
    "log.question": "- question: {text}",
    "log.options": "- options: {text}",
    "log.answer": "- answer: {text}",
    "log.outcome": "- outcome: {text}",
    "log.waited": "- waited: {seconds} s",
    "log.empty": "(empty)",
    "log.timeout": "nobody answered; the model went on by its own judgement",
    "log.declined": "the person declined to answer",
    "log.over_budget": "over the question limit; not sent to the person",
    "log.invalid": "empty question; not sent to the person",
    # -- the workbench (flower.core.workbench) -------------------------------------------
    "workbench.index": "# Workbench index",
    "workbench.generated": "(generated; do not edit by hand)",
    "workbench.empty": "- (empty)",
    "workbench.more": "- … and {count} older files",
    "workbench.added": "Added to the workbench since the index in your system prompt:\n{entries}",
    "workbench.where": "The workbench is at {root}/.",
    "workbench.external": " It is outside the workspace: always use absolute paths.",
    "workbench.rules": "Rules:",
    "workbench.scripts": (
        "1. Scripts to run again go into {scripts}/, their first line `# desc: what it does`."
    ),
    "workbench.artifacts": (
        "2. Output longer than {chars} characters (reports, data, logs) goes into "
        "{artifacts}/; the conversation gets only the path and the conclusion."
    ),
    "workbench.notes": "3. Key decisions go into {notes}/, one file per decision.",
    # -- the guards (flower.core.guard) --------------------------------------------------
    "guard.whitelist": (
        "{role} has no {tool} tool. That is by design, not a mistake. Write your conclusion "
        "in the body of your reply, where the framework takes it from; do not work around this."
    ),
    "guard.delegate": (
        "The main thread does not do the work itself ({tool} was blocked). Delegate to a "
        "subagent with the Agent tool: state the goal and the acceptance criteria in the task, "
        "and have it write long output into {artifacts} and report only the path and the "
        "conclusion."
    ),
    "guard.glance": (
        " Read-only looking commands (git status, ls, cat and the like) you may run yourself."
    ),
    "guard.artifacts": "the workbench's artifacts/",
    "guard.spill": (
        "[Output too long ({chars} characters); all of it is saved at {path}, read it in parts "
        "with Read when needed. The first {preview} characters follow]\n"
    ),
    # -- handoff (flower.core.handoff, flower.core.takeover) -----------------------------
    "handoff.step": 'step "{step}"',
    "handoff.this_step": "this step",
    "handoff.forked": (
        "The messages before this one are this step's task as it was first given and the "
        "first exchange of the session before you; the rest of that session is not here."
    ),
    "handoff.resume": (
        "This is the handoff the previous session of {whose} left: its context was full, and "
        "you, a brand-new session, carry on. You cannot see the earlier conversation; what "
        "follows is everything it handed over.\n\n"
        "{block}\n\n"
        'First check the real state of the workspace against "Scene", then carry on from '
        '"Next"; do not take the roads under "Dead ends" again.'
    ),
    "handoff.write": """\
The context is almost full ({used} of a {window}-token window used). This session ends \
here; a brand-new session takes the same step over. It cannot see this conversation, only \
the handoff you write now.

What each section holds:
- Doing (required): how far the work in hand has got.
- Decided: conclusions and decisions that are settled and need no more discussion, with \
their grounds.
- Dead ends: roads really tried that do not work, and why; leave it empty if none, do not \
invent any.
- Next (required): the first thing the new session should do, as concrete as possible.
- Scene: what the new session needs to know of the scene: files changed, key paths, \
commands to run, what did not finish.

Output only the five heading lines below and their contents, the headings exactly as \
written, each on its own line; write nothing else, and no code block.

{skeleton}""",
    "handoff.why": " ({why})",
    "handoff.degraded_doing": (
        "The previous session could not write a handoff{why}; how far it got is unknown."
    ),
    "handoff.degraded_next": (
        "First check the real state of the workspace (files, git status, the workbench's "
        "notes/ and artifacts/) to find out what is done and what is half done; then go on "
        'with the original task (its beginning is under "Scene").'
    ),
    "handoff.incomplete": (
        'the previous session wrote no complete handoff ("Doing" or "Next" missing)'
    ),
    "handoff.writing": "context {used}/{window}, writing the handoff",
    "handoff.done": "handoff written, a new session takes over",
    "handoff.done_at": "handoff written, a new session takes over: {path}",
    "runtime.will_not_heal": (
        "the step stops: the Claude Code CLI exited with exit code {code} before its first API "
        "request twice with the same error, which waiting will not change (fix it, then run "
        "again): {cause}"
    ),
    "runtime.near_handoff": "context {used}/{window}, near the handoff line {at}",
    "runtime.interrupt_note": (
        "(The human interrupted you to say the above. If a tool call that was in flight came "
        "back as interrupted or cancelled, that is the normal side effect of the interruption, "
        "not a failure of the environment: redo it if it is still needed.)"
    ),
    "runtime.carry_on_note": (
        "(The human interrupted you without a word: carry on with your task from where you "
        "were, do not wait for instructions. If a tool call that was in flight came back as "
        "interrupted or cancelled, that is the normal side effect of the interruption, not a "
        "failure of the environment: redo it if it is still needed.)"
    ),
    "document.placeholder": "(not filled in)",
    # -- the stores' replacements (flower.stores, through Runtime) ----------------------
    "stores.spilled": (
        "[Tool result archived: {chars} characters. All of it is at {path}; Read it when needed]"
    ),
    "stores.expired": (
        "[The result of {cmd} has expired ({age} turns ago); the state may have changed. "
        "Run it again if needed]"
    ),
    "stores.orphan": (
        "[The tool call was interrupted before it returned; there is no result. "
        "Run it again if needed]"
    ),
    # -- a worker cut short, handed on (flower.core.cutwork) -------------------------------
    "cut.coordinator": (
        "[flower was stopped while worker {agent} ({description}) worked; its report never "
        "came. What it had done:\n{calls}\nDo not have this done again: the next worker you "
        "start for this task is shown this list and checks it against the disk.]"
    ),
    "cut.worker": (
        "An earlier worker on this task ({description}) was cut short before it reported "
        "(flower was stopped); it worked in {cwd}. What it had done, from its transcript:\n"
        "{calls}\nCheck this against the disk and continue from there instead of starting "
        'over. A call marked "may have run" may or may not have happened: check before '
        "redoing it."
    ),
    "cut.handoff_coordinator": (
        "[worker {agent} ({description}) was working when the previous session handed off, "
        "and was cut short; its report never came. What it had done:\n{calls}\nDo not have "
        "this done again: the next worker you start for this task is shown this list and "
        "checks it against the disk.]"
    ),
    "cut.handoff_worker": (
        "An earlier worker on this task ({description}) was cut short before it reported (the "
        "session that sent it handed off, its context full); it worked in {cwd}. What it had "
        "done, from its transcript:\n{calls}\nCheck this against the disk and continue from "
        'there instead of starting over. A call marked "may have run" may or may not have '
        "happened: check before redoing it."
    ),
    "cut.done": "{n}. {call} -> {result}",
    "cut.failed": "{n}. {call} -> failed: {result}",
    "cut.open": "{n}. {call} -> no result: it was running at the cut and may have run",
    "cut.none": "(no tool call yet)",
    # -- the goal (flower.core.goal) -----------------------------------------------------
    "goal.feedback": (
        "The judge finds the goal not achieved yet. Carry on from the work as it is; do not "
        "start over."
    ),
    "goal.feedback_reason": "The judge's reason:\n{reason}",
    "goal.feedback_failed": "Failed checks:\n{items}",
    "goal.revision": (
        "Revised ({stamp}; where it conflicts with the above, this prevails):\n{quoted}"
    ),
    # -- resilience (flower.core.resilience) ---------------------------------------------
    "resilience.resume": (
        "Your last round of work was cut off by a network or service outage. First check the "
        "real state of the workspace (what you just did may or may not have happened), then "
        "carry on from where it stopped; do not start over."
    ),
    "resilience.offline": "{name} unreachable, waiting for it (at most {minutes} minutes)",
    "resilience.back": "{name} is back, going on",
    # -- the terminal (flower.cli.interact, flower.cli.render) ---------------------------
    "terminal.oracle_prompt": (
        "Someone asks during the run: {question}\n\nRecent events (newest last):\n{events}"
    ),
    "terminal.no_events": "(none)",
    "terminal.oracle_wait": "Waiting for the side answer before exiting (Ctrl+C: don't wait).",
    "terminal.interrupt": (
        "Interrupted: type what to tell the agent and press Enter; it carries on in the same "
        "session (a running tool call is cut off, a subagent's half-done work is lost). Just "
        "Enter = only interrupt; Ctrl+C again exits."
    ),
    "terminal.interrupted": "Interrupted; the agent carries on in the same session.",
    "terminal.oracle_failed": "side question failed: {error}",
    "terminal.oracle_said": "side answer: {answer}",
    # -- the report (flower.cli.picture) ---------------------------------------------
    "report.title": "flower run · {workspace} · {status} · {cost}",
    "report.subtitle": "{workspace} · started {start} · took {took} · runs {runs}",
    "report.outcome.ok": "ok",
    "report.outcome.failed": "failed",
    "report.outcome.achieved": "achieved",
    "report.outcome.not_yet": "not yet",
    "report.outcome.unreachable": "unreachable",
    "report.outcome.unfinished": "unfinished",
    "report.outcome.empty": "empty",
    "report.outcome.error": "error",
    "report.outcome.denied": "denied",
    "report.outcome.open": "no result",
    "report.mark.fault": "fault",
    "report.mark.retry": "retry",
    "report.mark.handoff": "handoff",
    "report.mark.reset": "compacted",
    "report.mark.message": "message",
    "report.key.done": "ok / achieved",
    "report.key.waiting": "waiting for you",
    "report.key.tool": "tool call",
    "report.lane.human": "human",
    "report.lane.events": "events",
    "report.lane.tools": "· tool calls",
    "report.worker": "worker",
    "report.chart.cost": "cost (USD)",
    "report.chart.context_share": "context (% of {window} tokens)",
    "report.chart.context": "context (tokens)",
    "report.table.verdicts": "Verdicts",
    "report.table.steps": "Steps",
    "report.table.tools": "Tool calls",
    "report.table.waits": "Waits for a human",
    "report.table.marks": "Faults, retries, handoffs",
    "report.table.problems": "Not read",
    "report.table.none": "none",
    "report.column.step": "step",
    "report.column.verdict": "verdict",
    "report.column.reason": "reason",
    "report.column.at": "at",
    "report.column.outcome": "outcome",
    "report.column.start": "start",
    "report.column.took": "took",
    "report.column.attempts": "attempts",
    "report.column.cost": "cost",
    "report.column.context": "context",
    "report.column.error": "error",
    "report.column.calls": "calls",
    "report.column.tools": "tools (calls)",
    "report.column.id": "id",
    "report.column.asked": "asked",
    "report.column.waited": "waited",
    "report.column.question": "question",
    "report.column.kind": "kind",
    "report.column.what": "what",
    "report.column.problem": "problem",
    "cli.exclude_prompt": (
        "flower keeps {shown} here: add them to .git/info/exclude so git status ignores them "
        "(this clone only)?"
    ),
    "cli.excluded": (
        "added {shown} to {path} (git ignores them in this clone; delete the lines to undo)"
    ),
    "cli.stopped_at_prompt": ("interrupted"),
    "cli.mistyped_prompt": (
        "{word!r} looks like `{prog} {meant}` mistyped. Start a run whose whole ask is {word!r}?"
    ),
    "status.none_started": "no step has started yet",
    "status.sessions": "sessions",
    "status.session": "session",
    "status.steps": "steps",
    "status.entries": "entries",
    "status.subagents": "subagents",
    "status.last_write": "last write",
    "status.total": "total cost: ${cost}",
    "status.asides": " (+ ${cost} of oracle asides)",
    "status.error": "error",
    "status.waiting": "waiting for you",
    "status.id": "id",
    "status.question": "question",
    "status.options": "options",
    "status.to_answer": 'to answer: flower answer <id> "..." --run-dir {run_dir}',
    "status.workbench": "workbench {path}: {counts}",
    "status.problem": "problem",
    "status.run": "run {run_id}",
    "status.pid": "pid {pid}",
    "status.now": "now {name} (${cost} so far)",
    "status.waiting_for": "waiting for you: {ids}",
    "status.step": "step",
    "status.ok": "ok",
    "status.attempts": "attempts",
    "status.cost": "cost",
    "status.turns": "turns",
    "status.time": "time",
    "status.resumed": "resumed",
    "status.retired": "{count} sessions retired",
    "status.running": "running",
    "status.waiting_human": "waiting for a human",
    "status.done": "done",
    "status.stopped": "stopped (resumable)",
    "status.lost": "lost: its process died (resumable)",
    "status.yes": "yes",
    "status.no": "no",
    "status.interrupted": "interrupted",
    "analyze.steps": "steps",
    "analyze.session": "session",
    "analyze.sessions": "sessions and their subagents",
    "analyze.calls": "calls",
    "analyze.in": "in",
    "analyze.out": "out",
    "analyze.cache": "cache",
    "analyze.tools": "tools",
    "analyze.deny": "deny",
    "analyze.err": "err",
    "analyze.cmpct": "cmpct",
    "analyze.no_sessions": "no session in sessions.db",
    "analyze.total": (
        "total: {calls} API calls, {tokens_in} tokens in, {tokens_out} out, {cached} cache "
        "read, cost {cost}; {errors} API errors, {compactions} compactions"
    ),
    "analyze.tool": "tool",
    "analyze.denied": "denied",
    "analyze.tool_calls": "tool calls",
    "analyze.chars": "chars",
    "analyze.call": "call",
    "analyze.largest": "largest tool results",
    # -- the live status line and the end line (flower.cli.render, flower.cli.go,
    # flowerbox.runs.control); the outcome words are the JSON's `status` in the person's words
    "live.round": "round {index}/{total}",
    "live.context": "context {amount}",
    "live.resumed": " (resumed)",
    "live.denied": "denied: {text}",
    "live.you_said": "you said: {text}",
    "live.agent_read": "the agent read: {text}",
    "end.line": "{status} · {spent} · exit {code}",
    "end.with_before": " (${total} with the runs it continues)",
    "end.drawn": "the run drawn: {command}",
    "end.stopped": "stopped ({by}); `flower resume` here continues it",
    "end.run_status": "{status}, exit {code}",
    "outcome.achieved": "achieved",
    "outcome.not_achieved": "not_achieved",
    "outcome.done": "done",
    "outcome.failed": "failed",
    "outcome.needs_human": "needs_human",
    "outcome.stopped": "stopped",
    "outcome.error": "error",
    "outcome.killed": "killed",
    "outcome.lost": "lost",
    "outcome.running": "running",
    # -- what a person reads when flower refuses (exit 2): each message names the problem
    # and, after its last colon, the fix (flower.cli.contract reads the fix from there)
    "error.label": "error:",
    "error.usage_fix": "run the command with --help to see what it takes",
    "error.see_help": "see `{command} --help` for what it takes",
    "error.workspace_not_folder": "workspace {path} is not a folder: create it or pass -w <folder>",
    "error.workspace_refused": (
        "refusing to work in {path}, {why}: run flower from a project folder "
        "(or pass -w <project folder>)"
    ),
    "error.why_system": "a system folder",
    "error.why_undecodable": (
        "a folder whose name is not valid UTF-8 (the Claude Code CLI cannot work there)"
    ),
    "error.why_home": "your home folder",
    "error.budget": (
        "{value} USD is no budget: pass more than 0, or leave the option out for no limit"
    ),
    "error.empty_model": (
        "an empty model name: pass an id or alias (sonnet, opus...), or leave --model out"
    ),
    "error.no_run_dir": (
        "no run directory at {path}: pass the run_dir of a flower run "
        "(default ./runs, or the --run-dir you gave it)"
    ),
    "error.workspace_missing": (
        "workspace {path} is not a folder: create it or pass an existing one"
    ),
    "error.workspace_undecodable": (
        "workspace {path} has a name that is not valid UTF-8, which the Claude Code CLI "
        "cannot work in: rename it"
    ),
    "error.isolated_not_git": (
        "worker {worker} is isolated in a git worktree, but {path} is not a git repository: "
        "run `git init` there, or drop the isolation (worker(..., isolate=False) / --no-isolate)"
    ),
    "error.isolated_no_commit": (
        "worker {worker} works in a git worktree made from your last commit, and {path} has "
        "none yet: commit once (`git commit --allow-empty -m start`), or drop the isolation "
        "(--no-isolate)"
    ),
    "error.run_dir_undecodable": "run_dir {path} has a name that is not valid UTF-8: pass another",
    "error.run_dir_is_file": "run_dir {path} is a file: pass a folder (or a new path)",
    "error.dotenv_unreadable": (
        "cannot read this .env file ({problem}); flower reads it for its settings: "
        "make it readable UTF-8 text, or move it away"
    ),
    "error.dotenv_missing": "no such .env file; check the path you passed",
    "error.dotenv_flower_env": (
        "no such .env file, but FLOWER_ENV names it; fix the path, or unset FLOWER_ENV"
    ),
    "error.no_credentials": (
        "No credentials: ANTHROPIC_API_KEY and ANTHROPIC_AUTH_TOKEN are both unset or empty.\n"
        "Run `flower setup`, which writes them to {path},\n"
        "or put ANTHROPIC_API_KEY=... in ./.env, or export it in your shell,\n"
        "or set FLOWER_ENV=/path/to/.env to name a file of your own."
    ),
    "fix.credentials": (
        "run `flower setup` (it saves your key where flower and flowerbox read it), or set "
        "ANTHROPIC_API_KEY in ./.env or in the environment"
    ),
    "error.no_ask": (
        'no ask: say what you want done, e.g. flower "add a --verbose flag" (only a run whose '
        "brief is complete continues without one: `flower resume`)"
    ),
    "error.finish_unknown": "--finish {value} is not one of {values}",
    "error.finish_needs_isolate": (
        "--finish {value} is for isolated runs: without --isolate the workers change "
        "your checkout directly; add --isolate, or leave --finish out"
    ),
    "error.no_prompt": (
        'an empty prompt: say what the agent should do, e.g. flower once "add a test for parse()"'
    ),
    "error.not_a_file": "{file} is not a file: pass the path of a Python file",
    "error.not_python": "{file} cannot be imported as Python",
    "error.no_workflow": (
        "{file} defines no Workflow: add `workflow = Workflow([...])` "
        "or `def build() -> Workflow` at module level"
    ),
    "error.nothing_to_resume": (
        "nothing to resume in {ws}: no run here has a complete brief or a recorded ask "
        '(start one with `flower "ask"`)'
    ),
    "error.no_such_question": (
        "no question {id} is waiting in {run_dir} ({known}); "
        "`flower status` lists them, --run-dir picks another run"
    ),
    "error.no_run_here": (
        "{run_dir} holds no run (no manifest, sessions or questions): "
        "pass --run-dir <the run's folder>"
    ),
    "error.not_git": (
        "{path} is not a git repository, and isolated workers need git worktrees: "
        "run `git init` there (and commit once), or pass --no-isolate"
    ),
    "error.mistyped": (
        "{quoted} looks like `{prog} {meant}` mistyped, so no run was started. "
        "If it really is the ask, say so: `{prog} {ask} {word}`"
    ),
    "error.mistyped_declined": "nothing started; did you mean `{prog} {meant}`?",
    "error.waiting_ones": "the waiting ones: {ids}",
    "error.none_waiting": "none is waiting",
    # -- flowerbox's refusals (exit 2)
    "box.workspace_not_folder": "workspace {ws} is not a folder: pass -w <project folder>",
    "box.system_folder": (
        "refusing to mount {ws} into the box, {why}: run flowerbox from a project "
        "folder (or pass -w <project folder>)"
    ),
    "box.sensitive_folder": (
        "refusing to mount {ws} into the box, as it is, holds or lies in {folder} ({what}), "
        "which the agent must never see: run flowerbox from a project folder (or pass -w "
        "<project folder>)"
    ),
    "box.unmountable": "Docker cannot mount a path holding {chars}, as {ws} does: rename it",
    "box.linked_worktree": (
        "{ws} is a linked git worktree (its .git is a file), and flowerbox isolates workers "
        "in worktrees of a repository's main folder: run it in the main checkout, or pass "
        "--no-isolate"
    ),
    "box.not_git_top": (
        "{ws} is not the top folder of a git repository, and flowerbox isolates workers in "
        "git worktrees: run `git init && git commit --allow-empty -m start` there (or pass "
        "-w <the repository's top folder>), or pass --no-isolate"
    ),
    "box.workspace_env_unread": (
        "{path} was not read: flowerbox never takes credentials from the "
        "workspace (the box can write it). Run `flowerbox setup`, or move the key to "
        "~/.config/flower/.env."
    ),
    "box.no_engine": (
        "cannot reach a Docker engine: start it (`systemctl start docker`, or `dockerd &`), "
        "or point DOCKER_HOST at one ({problem})"
    ),
    "box.image_gone": "the image {image} is gone: run `flowerbox build`",
    "box.image_missing": "the image {image} is not here: run `flowerbox build`",
    "box.net_unknown": "--net {net}: use one of {nets}",
    "box.runtime_unknown": "--runtime {runtime}: use one of {runtimes}",
    "run.none_here": (
        "no flowerbox runs in {workspace}: start one with "
        '`flowerbox "ask" --detach`, or pass -w <workspace> or a run id'
    ),
    "run.ambiguous": "{run} names {count} runs: give more of the id",
    "run.no_such": "no run {run} here or in the index: `flowerbox ps --all` lists them",
    "run.ended": (
        "run {run} has already ended ({status}): there is nothing to {doing}; "
        "`flowerbox logs {run}` shows what it did, `flowerbox resume {run}` continues it"
    ),
    "doing.attach to": "attach to",
    "doing.stop": "stop",
    "doing.answer": "answer",
    "doing.send to": "send to",
    # -- langbox: flowerbox box/, runs/, hostgit, errors, selftest (doctor)
    "untrusted.refused": "{path}: {what}; flowerbox does not follow or read it",
    "untrusted.too_big": "{size} bytes, more than {limit}",
    "untrusted.grew": "grew while read",
    "untrusted.link_or_not_folder": "a link or not a folder",
    "untrusted.symlink": "a symbolic link",
    "untrusted.not_regular": "not a regular file",
    "untrusted.larger_than": "larger than {limit} bytes",
    "hostgit.failed": "git {args} failed: {said}",
    "gitshadow.not_dir_or_file": (
        "{path} is not a folder or a file (a symlink?): flowerbox cannot give "
        "the box a git directory of its own; make it a real folder or run with --no-isolate"
    ),
    "gitshadow.nothing_to_shadow": "{git_dir} is not a git folder: nothing to shadow",
    "gitshadow.objects_in_box": "objects_in_box must be a normalized absolute path: {path}",
    "gitshadow.dest_not_empty": "{dest} is not empty: give make an empty folder",
    "gitshadow.commondir": (
        "{git_dir} has a commondir (a linked worktree's gitdir moved in place): flowerbox "
        "cannot shadow it; run in the main worktree or with --no-isolate"
    ),
    "gitshadow.unreadable": "git cannot read {git_dir}: {said}",
    "gitshadow.bare": (
        "{workspace} is a bare repository or its gitdir is elsewhere ({gitdir}): flowerbox "
        "needs a working tree with .git at its top; clone it or run with --no-isolate"
    ),
    "gitshadow.ref_storage": (
        "{workspace} stores refs as {storage}: flowerbox reads branches only from "
        "'files' refs; convert with `git refs migrate --ref-format=files` or run with "
        "--no-isolate"
    ),
    "gitshadow.run_id": "run id {run_id} is not a plain name ([A-Za-z0-9._-])",
    "gitshadow.branch_in_way": "the branch {branch} is in the way of {base}/*: rename it",
    "gitshadow.brought_back": "branches {base}/* exist already: this run id was brought back",
    "gitshadow.rmtree": "this platform's rmtree can follow symlinks: remove {path} by hand",
    "gitshadow.no_free_name": "no free name to rename {target} aside",
    "engine.image_absent": "the image {tag} is not here",
    "engine.image_stale": "the image {tag} was built for flowerbox {built_for}, not {version}",
    "engine.unknown_version": "an unknown version",
    "engine.no_dockerfile": (
        "{found}, and this flowerbox has no Dockerfile to build it from: run `flowerbox "
        "build PATH` with PATH {hint}, or pass --image"
    ),
    "engine.build_failed": "building {tag} from {context} failed: {problem}",
    "engine.lost_track": "lost track of {name}: {problem}",
    "engine.start_failed": "starting {name} failed: {problem}",
    "engine.no_broker": (
        "the broker does not serve {socket}: is `flowerbox broker` still running?"
    ),
    "engine.gateway_died": "the gateway died before it listened:\n{logs}",
    "engine.no_lease": (
        "the gateway started but its lease socket {socket} did not answer ({problem});"
        " is the image older than this flowerbox? `flowerbox build` makes it again"
    ),
    "engine.gateway_silent": "the gateway did not open {socket} in {seconds}s",
    "engine.no_runtimes": "cannot ask the Docker engine for its runtimes: {problem}",
    "engine.no_runtime": (
        "the Docker engine has no runtime {runtime} (it has {runtimes}): register gVisor with "
        "`sudo bash docker/engine.sh --gvisor` (docs/image.md), or drop --runtime"
    ),
    "engine.none_listed": "none listed",
    "engine.image_lookup": "cannot look up the image {tag}: {problem}",
    "source.clone_hint": (
        "a flowerbox checkout (the folder with its Dockerfile and pyproject.toml, e.g. a "
        "`git clone` of your flowerbox repository at version {version})"
    ),
    "source.installed": (
        "this flowerbox is installed, not run from a checkout, so there is no Dockerfile "
        "to build from: run `flowerbox build PATH` with PATH {hint}, or run "
        "`flowerbox build` in it"
    ),
    "source.not_checkout": "{path} is not a flowerbox checkout: pass {hint}",
    "source.other_version": (
        "{path} is flowerbox {version}, and this flowerbox is {own}: an image "
        "built from it would run other code than this host expects; install that "
        "checkout (`pip install {path}`), or build from a checkout of {own}"
    ),
    "prepare.run_dir": (
        "cannot create {run_dir} ({problem}): flowerbox keeps each run's sessions "
        "and records in the workspace; make {ws} writable"
    ),
    "prepare.workbench": (
        "cannot create the workbench {workbench} beside the repository "
        "({problem}): isolated workers share it there; make {parent} "
        "writable, or pass --no-isolate (the workbench then lives in the workspace)"
    ),
    "prepare.workbench_link": "{workbench} is not a folder (a link?): remove it and retry",
    "prepare.flower_env_inside": (
        "FLOWER_ENV names {named}, inside the workspace, which the box can write: "
        "move that file out of the workspace (e.g. to ~/.config/flower/.env)"
    ),
    "prepare.not_plain": (
        "{path} is a link or not a plain file or folder (an earlier box may "
        "have planted it), and flowerbox will not mount it: remove or replace it, "
        "then retry"
    ),
    "prepare.open_net_filters": (
        "--allow and --allow-preset filter the egress proxy, which --net open does not "
        "use: drop them, or drop --net open"
    ),
    "prepare.gvisor_open": (
        "--net open gives the box a network of its own, which a gVisor box does not have "
        "(docker/gvisor.sh registers runsc with --network=none): drop --net open and "
        "--allow what the agent needs, or drop --runtime runsc"
    ),
    "prepare.egress_host_shape": (
        "{var}: {item} is not name=address (e.g. mirror.internal=10.1.2.3) ({problem})"
    ),
    "prepare.egress_host_address": "{var}: {item} maps an address, not a name",
    "spec.config_unreadable": "cannot read {path}: {problem}; fix it or remove it",
    "spec.protect_list": '{path}: `protect` must be a list of paths, e.g. protect = ["deploy/"]',
    "spec.protect_entry": (
        "{path}: protect entry {entry} must be a path relative to the workspace, "
        "inside it (no leading / and no ..)"
    ),
    "state.unusable": (
        "cannot use {path} for flowerbox's records ({problem}): set "
        "XDG_STATE_HOME to a folder of your own"
    ),
    "state.socket_root_relative": ("{var}={named} is not an absolute path: name one, or unset it"),
    "state.socket_root_unmade": (
        "cannot make {root} for your runs' sockets ({problem}): make its folder, or unset {var}"
    ),
    "state.socket_root_foreign": (
        "{root} holds your runs' sockets, but it is not a folder of yours (a link, or "
        "another user made it): remove it and run again"
    ),
    "state.bad_run_id": "{run_id} is not a flowerbox run id (like 20261201-172400-a1b2c3)",
    "terminal.no_docker_cli": (
        "an interactive `flowerbox shell` needs the docker CLI on PATH: install it "
        "(the docker-ce-cli or docker.io package), or pass a command that needs no "
        "terminal: flowerbox shell -- COMMAND < /dev/null"
    ),
    "hostgit.config_timeout": (
        "reading your repository's git config in {workspace} took over "
        "{seconds} s, so flowerbox runs no git there: a file it includes "
        "may be a FIFO or a device the run left in place of a file (`git config "
        "--show-origin --get-regexp 'include'` names them; `ls -l` each)"
    ),
    "hostgit.refused_key": (
        "{path} sets {key}, and git reads it from your repository's config: "
        "it lies in (or is included from) the working tree the run could rewrite, "
        "so flowerbox runs no git there; move that setting out of the working tree "
        "(`git config --show-origin --get-regexp '^{section}\\.'` shows "
        "where it is included)"
    ),
    "hostgit.no_git": (
        "no git on your PATH outside a git working tree (flowerbox never runs a "
        "program from one, nor from a relative PATH entry): install git"
    ),
    "hostgit.could_not_run": "git {command} could not run: {problem}",
    "hostgit.overran": (
        "git {command} {why} and was stopped: the repository may be very large "
        "or damaged (or what a run left built to be); run the command by hand to see"
    ),
    "hostgit.why_output": "printed more than {mib} MiB",
    "hostgit.why_time": "ran past {seconds} s",
    "hostgit.hooks": "cannot make {folder} for git's hooks path: {problem}",
    "hostgit.form": "flowerbox does not run `git {command}` on the host in that form",
    "hostgit.filter_eq": (
        "a filter driver of your repository's config has a `=` in its name, which no "
        "`-c` setting can reach: rename it (`git config --get-regexp '^filter\\.'`)"
    ),
    "runs.nothing_to_bring_back": (
        "run {run} has nothing left to bring back: its commits came back when "
        "it ended (or it had no git directory of its own)"
    ),
    "runs.bring_back_failed": (
        "bringing back run {run}'s commits failed again: {problem} (its git "
        "directory is still kept)"
    ),
    "runs.broker_running": "a broker runs already on {folder}: `flowerbox broker` once a host",
    "runs.ledger_folder": "cannot make the ledger's folder {folder}: {problem}",
    "runs.run_dir_outside": "run {run} keeps its run dir outside its workspace",
    "runs.undeliverable": "cannot deliver to run {run}: {problem}",
    "runs.no_supervisor": "cannot start the run's supervisor ({problem}): see {log}",
    "runs.budget_spent": (
        "run {run} has spent its budget of ${budget}: "
        "`flowerbox resume {run} --budget USD` continues it with more"
    ),
    "runs.requests_unreadable": "cannot read the request log of run {run}: {problem}",
    "runs.still_running": (
        "run {run} is still running in {workspace}: `flowerbox attach "
        "{run}` follows it, `flowerbox stop {run}` stops it"
    ),
    "runs.unkept": (
        "run {run} in {workspace} lost the process that kept it (its "
        "containers may still run): `flowerbox stop {run}` cleans it up"
    ),
    "runs.record_unreadable": "a run record holds no {kind} flowerbox can read: {problem}",
    "selftest.weaken_unknown": "--weaken {value}: use one of {variants}, or {joined}:CONTAINER",
    "doctor.ok": "OK",
    "doctor.fail": "FAIL",
    "doctor.fix": "fix: {fix}",
    "doctor.name.engine": "engine",
    "doctor.name.gvisor": "gvisor",
    "doctor.name.image": "image",
    "doctor.name.credentials": "credentials",
    "doctor.name.workspace": "workspace",
    "doctor.name.user": "user",
    "doctor.name.state": "state",
    "doctor.name.gateway": "gateway",
    "doctor.name.proxy": "proxy",
    "doctor.default_socket": "the default socket",
    "doctor.no_engine": "no Docker engine answers at {where}",
    "doctor.no_engine_fix": (
        "start it (`systemctl start docker`, or `bash docker/engine.sh` in a checkout), "
        "or point DOCKER_HOST at one; you must be allowed to use it (the docker group)"
    ),
    "doctor.engine_ok": "a Docker engine answers at {where}",
    "doctor.no_look": "cannot look without an engine",
    "doctor.see_engine": "see engine",
    "doctor.runtimes_unsaid": "the engine did not say its runtimes: {problem}",
    "doctor.no_runsc": (
        "the engine has no runsc (optional: --runtime runsc puts gVisor's kernel between"
        " the agent and the host's)"
    ),
    "doctor.no_runsc_fix": "`sudo bash docker/engine.sh --gvisor` registers it (docs/image.md)",
    "doctor.runsc": "the engine offers runsc ({path}), platform {platform}",
    "doctor.its_default": "its default",
    "doctor.image_no_look": "{image}: cannot look without an engine",
    "doctor.image_absent": "{image} is not here",
    "doctor.image_fix": (
        "run `flowerbox build` (or pass --image / set FLOWERBOX_IMAGE to one you have)"
    ),
    "doctor.dotenv_unreadable": "a .env file cannot be read: {problem}",
    "doctor.dotenv_fix": "fix or remove it",
    "doctor.no_credentials": "no ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN found",
    "doctor.no_credentials_fix": (
        "run `flowerbox setup` (saves your key to the global .env, 0600), or export "
        "ANTHROPIC_API_KEY (flowerbox never reads a workspace .env)"
    ),
    "doctor.credential_from": "{key} from {origin}",
    "doctor.process_environment": "the process environment",
    "doctor.workspace_ok": "{ws} (git; {count} protected paths)",
    "doctor.root": (
        "you are root, so the box runs as uid 0 (every other restriction holds); run flowerbox "
        "as your own user, in the docker group, to avoid it"
    ),
    "doctor.uid": "uid {uid}: the box runs as you",
    "doctor.swept": "removed {count} credentials file(s) left by killed runs",
    "doctor.none_left": "no credentials left on disk",
    "doctor.needs_above": "needs the engine, the image, credentials and a workspace (above)",
    "doctor.fix_above": "fix the misses above",
    "doctor.box_failed": "the box did not start: {problem}",
    "doctor.see_message": "see the message",
    "doctor.gateway_fix": (
        "check your network and ANTHROPIC_BASE_URL; `flowerbox shell` shows the box"
    ),
    "doctor.proxy_fix": (
        "rebuild the image (`flowerbox build`) so the gateway serves the egress proxy; "
        "with --net open there is none by choice"
    ),
    "doctor.summary_misses": "{count} checks: {misses} to fix",
    "doctor.summary_ok": "{count} checks: all OK",
    "prepare.what_config": "your configuration",
    "prepare.what_credentials": "flower's credentials file",
    "prepare.what_records": "flowerbox's own records",
    "doctor.gateway_ok": "the gateway started; its upstream is reachable",
    "doctor.gateway_health": "health: {why}",
    # -- lead: what flowerbox says as a box starts (warnings, how to answer, a detached run)
    "launch.root_warning": (
        "flowerbox runs as root, so the box runs as uid 0 (every other restriction still "
        "holds). Run flowerbox as your own user (in the docker group) to avoid it."
    ),
    "launch.typed_answers": (
        "A line typed here answers the run's oldest open question (or, with none open, is sent "
        "to the run); `flowerbox answer` does the same from another terminal."
    ),
    "launch.net_open": (
        "--net open: the agent's container has a network of its own; its traffic is neither "
        "filtered nor logged (the API still goes through the gateway)."
    ),
    "launch.nobody_answers": (
        "stdin is not a terminal, so the agents' questions are not waited for (--timeout 0); "
        "to answer them from another terminal with `flowerbox answer`, pass --timeout SECONDS"
    ),
    "launch.detached": "{run_id} runs in the background: flowerbox ps | logs -f | attach | stop",
    "launch.and": " and ",
    "launch.excluded": "added {shown} to {path} (git ignores them in this clone; delete to undo)",
    # -- langnet: the broker, the gateway and proxy, the cluster (flowerbox.broker,
    # flowerbox.sidecar, flowerbox.kube): refusals answered to the box, logged, or printed
    "broker.no_answer": (
        "the broker on {path} did not answer ({problem}): start it with `flowerbox broker`"
        " or stop it to use a private gateway per run"
    ),
    "broker.not_object": "the broker on {path} answered something else than a JSON object",
    "broker.refused": "the broker refused to {op}: {error}",
    "broker.notes_no_scratch": "no scratch repository for the note: {problem}",
    "broker.notes_push_failed": "the push of {ref} to {url} failed {tries} times: {refused}",
    "broker.git_failed": "git {command} failed: {problem}",
    "broker.git_no_host": (
        "{source} has GIT_TOKEN but no usable GIT_HOST; add the remote's host the token "
        "is for, e.g. GIT_HOST=github.com"
    ),
    "broker.git_base_url": "{source}: GIT_BASE_URL must be an http(s) URL with no credential",
    "broker.body_over": "a body over {limit} bytes",
    "broker.ledger_unopened": (
        "cannot open the broker's ledger {path}: {problem}; move it away to start afresh"
    ),
    "broker.ledger_write": "the broker's ledger refused a write: {problem}",
    "broker.ledger_read": "cannot read the broker's ledger: {problem}",
    "broker.cannot_listen": "cannot listen on {api}, {proxy} and {git}: {problem}",
    "broker.token_mismatch": "run {run} is known with another token: not served",
    "broker.token_reused": "its token is another run's: not served",
    "broker.metrics_unserved": (
        "cannot serve metrics on --metrics {address}: {problem}; pass a free HOST:PORT"
    ),
    "broker.bad_address": "{flag} {address}: give HOST:PORT, e.g. 0.0.0.0:8080",
    "broker.no_cluster": (
        "--listen learns the runs from the cluster, and no cluster is reachable ({problem}):"
        " run the broker in its Pod (flowerbox kube render --broker-manifests) or set"
        " KUBECONFIG"
    ),
    "broker.not_run_id": "not a run id: {value}",
    "broker.bad_budget": "a run's budget must be a positive number of dollars: {budget}",
    "broker.control_unbound": (
        "cannot bind the broker's control socket {path}: {problem};"
        " a unix socket's path must stay under 108 bytes: set XDG_STATE_HOME to a"
        " shorter folder"
    ),
    "broker.paths_relative": "socket_dir and gateway_dir must be absolute paths",
    "broker.registered_already": "run {run} is registered already",
    "broker.cannot_serve": "cannot serve run {run} in {path}: {problem}",
    "broker.unknown_op": "unknown op {op}: register, revoke or status",
    "broker.pkt_length": "a pkt-line length that is not four hex digits: {length}",
    "broker.pkt_size": "a pkt-line length of {size}; git's are 5 to {most} (or 0)",
    "broker.pkt_lines": "more than {most} lines before the pack",
    "broker.pkt_ascii": "a command list line that is not ASCII",
    "broker.pkt_head": "more than {most} bytes before the pack",
    "broker.pkt_ended": "the push ended inside its command list",
    "broker.pkt_capabilities": "capabilities after the first command",
    "broker.pkt_not_command": "not a ref update (old new ref): {line}",
    "broker.pkt_oid_lengths": "old and new object ids of different lengths",
    "gateway.head_too_large": "the request head is too large",
    "gateway.closed_in_head": "the connection closed inside a request head",
    "gateway.not_request": "not a request head",
    "gateway.both_lengths": "both Transfer-Encoding and Content-Length",
    "gateway.body_ended": "the request body ended early",
    "gateway.unexpected_event": "unexpected {event} in a request body",
    "gateway.body_too_large": "the request body is larger than {limit} bytes",
    "gateway.too_slow": "the request took too long to arrive",
    "gateway.bare_line_end": "a bare CR or LF in the request head; lines end with CRLF",
    "gateway.empty_line": "an empty line before the request line",
    "gateway.obs_fold": "an obs-fold (a header line starting with a space or tab)",
    "gateway.credentials_unread": "cannot read the credentials file {path}: {problem}",
    "gateway.no_key": (
        "{source} holds neither ANTHROPIC_API_KEY nor ANTHROPIC_AUTH_TOKEN; "
        "run `flower setup` on the host or put one of them in the file"
    ),
    "gateway.base_url": "{source}: ANTHROPIC_BASE_URL must be an http(s) URL",
    "gateway.egress_log_needed": "--proxy-socket needs --egress-log: every decision is logged",
    "gateway.log_unopened": "cannot open the {name} {path}: {problem}",
    "gateway.requests_log": "requests log",
    "gateway.egress_log": "egress log",
    "egress.unknown_preset": "unknown --allow-preset {preset}: use one of {known}",
    "egress.allow_all": "--allow '*' would allow everything: pass --net open for that",
    "egress.bad_entry": (
        "--allow {entry}: pass a bare host name like github.com, `*.github.com` or "
        "one IP address (no scheme, port, path or range)"
    ),
    "egress.entry_problem": "--allow {entry}: {problem}",
    "egress.wildcard_address": "--allow {entry}: `*.` takes a domain, not an address",
    "prices.unreadable": "{path}: cannot read the prices file ({problem})",
    "prices.not_object": "{path}: expected a JSON object of model id -> prices",
    "prices.bad_figure": (
        "{path}: {model} needs {name} as a number >= 0 (USD per million tokens), got {value}"
    ),
    "prices.not_prices": "{path}: {model} must be an object of prices, got {entry}",
    "prices.long_prompt": "{path}: {model} long_prompt needs above_prompt_tokens > 0",
    "kube.no_kubeconfig": "no usable kubeconfig ({problem}): set KUBECONFIG or pass --context NAME",
    "kube.refused_to": (
        "the cluster refused to {what} in namespace {namespace}: "
        "{status} {reason}; check `kubectl auth can-i` for your context"
    ),
    "kube.do_read_volume": "read run {run}'s volume",
    "kube.do_read": "read {name}",
    "kube.do_delete": "delete {name}",
    "kube.do_list_jobs": "list jobs",
    "kube.do_list_pods": "list pods",
    "kube.do_read_logs": "read logs",
    "kube.refused_object": (
        "the cluster refused {kind}/{name}: {status} {reason}; "
        "`flowerbox kube render` prints it for `kubectl apply --dry-run=server -f -`"
    ),
    "kube.no_command": "run {run}'s volume records no command: start a new run",
    "kube.still_running": "run {run} is still running: `flowerbox stop {run} --on kube` first",
    "kube.not_running": "run {run} is not running: `flowerbox resume {run} --on kube` first",
    "kube.no_pod": (
        "run {run} has no Pod in namespace {namespace}: `flowerbox ps --on kube` lists the runs"
    ),
    "kube.no_container_pod": "run {run} has no {container} Pod yet: try again",
    "kube.no_job": "no Job of run {run} in namespace {namespace}",
    "kube.wait_timeout": (
        "run {run} did not end within {seconds:.0f} s: "
        "`flowerbox logs {run} --on kube` shows where it is"
    ),
    "kube.remove_refused": "the cluster refused to remove {what}: {status} {reason}",
    "kube.bad_name": (
        "{what} {value} is not a Kubernetes name: use lower-case letters, "
        "digits and '-' (at most 63), starting and ending with a letter or digit"
    ),
    "kube.repo_scheme": (
        "--repo {repo}: pass an https:// git URL (the broker fetches it and "
        "holds its credential; no other scheme goes through it)"
    ),
    "kube.bad_run_id": (
        "run id {run} cannot name Kubernetes objects: use lower-case letters, "
        "digits and '-' (at most 40)"
    ),
    "relay.header_fields": "more than {most} header fields",
    "relay.other_repo": "run {run} may reach its repository {repo} only",
    "relay.no_credential": "the broker holds no git credential for {host}",
    "relay.no_bearer": "send one Authorization: Bearer <the run's token>",
    "relay.dead_token": "this token is no live run's",
    "relay.encoded": "a push's body is sent as it is, never encoded",
    "relay.unreachable": "cannot reach the git remote {host}: {problem}",
    "relay.broke_off": "the answer broke off: {error}",
    "relay.push_options": "push options are refused (a forge may act on them)",
    "relay.capability": "the push capability {capability} is refused (a forge may act on it)",
    "relay.remote_refused_credential": (
        "the git remote refused the broker's git credential for {repo} (HTTP {status}); "
        "check GIT_TOKEN in the broker's credentials file"
    ),
    "relay.not_found": "{repo}: not found at the git remote",
    "relay.redirected": "the git remote redirected (HTTP {status}); the relay follows none",
    "relay.remote_status": "the git remote answered HTTP {status}",
    "relay.method": "{method} is not a git smart-HTTP request; only GET and POST are",
    "relay.not_smart": "only git's smart HTTP is relayed (info/refs?service=...)",
    "relay.not_service": "only POST .../git-upload-pack or .../git-receive-pack is relayed",
    "relay.not_repo": "not a repository path the relay serves: /HOST/PATH of an https URL",
    "relay.many_refs": "a push of {count} refs ({names}); a run pushes {own} alone",
    "relay.not_own": "{ref} is not this run's ref; a run pushes {own} alone",
    "relay.deletes": "deleting {own} is refused",
    "relay.no_report": "a push that asks for no report-status is refused (it could not be noted)",
    "broker.why_no_job": "run {run} has no running Job; its token is refused until one runs",
    "broker.why_unknown_token": "not a token of a run this broker serves",
    "broker.why_not_listed": (
        "run {run} is served again once the broker has listed the cluster's Secrets"
    ),
    "broker.lease_held": "the lease of run {run} is held already",
    "broker.why_ended": "run {run} has ended; its token is revoked",
    "broker.why_two_credentials": "{problem}; send the run's token once",
    "broker.why_no_token": "no token; send the run's token as x-api-key",
    "broker.why_proxy_two": "{problem}; put the run's token in the proxy URL",
    "broker.why_proxy_no_token": (
        "no token: put the run's token in the proxy URL, http://run:TOKEN@host:port"
    ),
    "broker.not_its_token": (
        "this request does not carry run {run}'s token; each box uses only the token it was given"
    ),
    "gateway.body_unreadable": (
        "the request body is not one JSON object it can read ({why}); it"
        " must read a body to know what it makes the API fetch"
    ),
    "gateway.body_not_utf8": "it is not UTF-8",
    "gateway.body_too_deep": "it is nested too deep",
    "gateway.body_not_object": "it is not a JSON object",
    "gateway.body_surrogate": "a string holds a lone surrogate escape",
    "gateway.not_endpoint": (
        "{method} {target} is not an API endpoint the Claude Code"
        " CLI uses; it forwards only {allowed} (docs/gateway.md)"
    ),
    "gateway.endpoints_and": " and ",
    "gateway.keeper_gone": (
        "the run's keeper on the host is gone, so its box is being stopped:"
        " nothing more is forwarded"
    ),
    "gateway.lease_unbound": "cannot listen on the lease socket {path}: {problem}",
    "gateway.unreachable": "cannot reach {upstream}: {reason}",
    "gateway.internal_error": (
        "internal error while handling this request (a flowerbox bug: its"
        " traceback is in the gateway's log, `flowerbox logs RUN`; please report it)"
    ),
    # -- lead: the gateway's budget refusals (a run's budget, or the broker's team budget)
    "meter.run_budget": "the run's budget",
    "meter.run_remedy": "raise it with --budget",
    "meter.team_budget": "the team's budget",
    "meter.team_remedy": "raise it with `flowerbox broker --team-budget`",
    "meter.spent": "flowerbox gateway: {whose} of {budget} is spent ({total} used); {remedy}",
    "meter.no_room": (
        "flowerbox gateway: this request could cost up to {amount} and {whose} of {budget} has"
        " {left} left ({total} used); {remedy}"
    ),
    "meter.busy": (
        "flowerbox gateway: this request could cost up to {amount}; {whose} of {budget} has"
        " {left} left, and {reserved} of it stayed reserved by requests in flight; {remedy}"
    ),
    # -- langflower: flower/, flowerbox/cli/ (refusals, delivery lines) ----------------
    "cli.analyze_no_run_dir": ("no run directory at {path}: pass the run_dir of a flower run"),
    "cli.analyze_nothing_ran": ("{path} holds neither {sessions} nor {manifest}: nothing ran"),
    "cli.png_no_chromium": (
        "--png needs a headless Chromium: install it (Debian/Ubuntu: apt-get "
        "install chromium), set FLOWER_CHROMIUM to its path, or use --svg"
    ),
    "cli.png_did_not_run": "--png: {browser} did not run ({problem}); use --svg",
    "cli.png_drew_nothing": "--png: {browser} drew nothing ({tail}); use --svg",
    "cli.events_unwritable": "--events {path}: cannot write there ({problem})",
    "cli.passthrough_refused": "flower {command} would refuse this: {problem}",
    "cli.passthrough_fixed": (
        "{options}: set by the program that runs flower {command}; leave it out"
    ),
    "cli.report_no_steps": (
        'no steps recorded in {manifest}: run `flower "ask"` first, or pass the '
        "run directory of one"
    ),
    "cli.cannot_write": "cannot write {path} ({problem}): pass another path",
    "cli.no_run_matches": (
        "no run in {run_dir} match {given} (runs there: {listed}): pass one of "
        "those ids, or its unique start"
    ),
    "cli.several_runs_match": (
        "several runs in {run_dir} match {given} (runs there: {listed}): pass "
        "one of those ids, or its unique start"
    ),
    "cli.none": "none",
    "setup.env_unset": (
        "--key-from-env {name}: that environment variable is unset or empty; "
        "export the key in it first"
    ),
    "setup.no_stdin": (
        "no {name} on stdin, which is not a terminal: pipe it in (printf '%s' "
        '"$KEY" | flower setup) or pass --key-from-env VAR'
    ),
    "setup.none_given": "no {name} given: run `flower setup` again and paste it",
    "setup.bad_chars": (
        "the {name} given holds a space or a character no key has: paste the key "
        "alone (no quotes, no `Bearer `, no other text)"
    ),
    "setup.too_short": (
        "the {name} given is {length} characters long, too short for a key: paste the whole key"
    ),
    "setup.not_sk_ant": (
        "the {name} given ({masked}) does not start with {prefix}, as keys of "
        "the Anthropic API do: paste the key from console.anthropic.com, or pass "
        "--token for a bearer token, or --base-url for a gateway with keys of "
        "its own"
    ),
    "setup.bad_url": "--base-url {url} must start with http:// or https://",
    "setup.multiline": "{key}: a value cannot span lines",
    "state.lineage_corrupt": (
        "{path} is not a lineage file of this flower (expected "
        '{{"workspaces": {{path: {{"steps": {{...}}}}}}}}); it was left '
        "untouched: move it aside to start fresh"
    ),
    "state.progress_corrupt": (
        "{path} is not a progress file of this flower (expected "
        '{{"workspaces": {{path: {{"runs": [...], "steps": {{...}}}}}}}}); it '
        "was left untouched: move it aside to start the rounds afresh"
    ),
    "state.manifest_not_list": (
        "{path} holds a JSON {kind}, not a list of rows; it was left untouched: "
        "move it aside and rerun"
    ),
    "state.manifest_row": (
        "{path} holds a row that is not a JSON object; it was left untouched: "
        "move it aside and rerun"
    ),
    "state.asks_corrupt": (
        "{path} is not a list of questions; it was left untouched: move it aside "
        "(the run asks again what it still needs)"
    ),
    "state.not_json": (
        "{path} is not valid JSON ({problem}); it was left untouched: repair it "
        "or move it aside, then retry"
    ),
    "state.lock_reentrant": "{lock} is already held by this thread (not reentrant)",
    "json.too_large": "larger than {limit} bytes: not read",
    "json.too_deep": "nested deeper than {depth} levels (or unbalanced): not read",
    "json.not_json": "not JSON ({problem})",
    "otlp.no_sdk": (
        "{name} is set, so flower would export traces, but the OpenTelemetry SDK "
        "is not installed: run `{install}` (or unset {name})"
    ),
    "otlp.protocol": (
        "OTLP protocol {protocol} is not one flower's exporter speaks: set "
        "OTEL_EXPORTER_OTLP_PROTOCOL to http/protobuf (the default) or grpc"
    ),
    "otlp.no_exporter": (
        "traces over {protocol} need {module}: run `{package}`, or set "
        "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"
    ),
    "workbench.not_dir": (
        "workbench folder {path} exists and is not a directory; move that file away"
    ),
    "workbench.cannot_create": (
        "cannot create workbench folder {path} ({problem}): make {parent} "
        "writable, or work in a folder you can write to"
    ),
    "store.message": "{path}: {problem}. {fix}",
    "store.network_fs": (
        "is on a {fstype} filesystem (mounted at {point}); SQLite's locks and "
        "WAL shared memory do not work there and the database would be corrupted"
    ),
    "store.fix_local_disk": ("Put the run directory on a local disk: pass another run_dir."),
    "store.fix_move_aside": "Move it aside or pass another run_dir.",
    "store.not_sqlite": "is not a SQLite database ({problem})",
    "store.quick_check": "fails PRAGMA quick_check ({verdict})",
    "store.fix_restore": ("Restore it from a backup, or move it aside or pass another run_dir."),
    "store.foreign": "is a SQLite database of another program (tables: {tables})",
    "store.lookalike": "has tables named like ours with other columns ({tables})",
    "store.newer": "was written by a newer flower (unknown migrations: {migrations})",
    "store.fix_upgrade": "Upgrade flowerbox, or pass another run_dir.",
    "store.no_wal": "cannot be switched to WAL mode (journal_mode stays {mode})",
    "store.cannot_open": "cannot be opened ({problem})",
    "store.fix_permissions": "Check its permissions or pass another run_dir.",
    "store.locked": ("stayed locked by another writer through {attempts} waits of {wait_ms} ms"),
    "store.fix_stop_writer": ("Stop the other process writing to it, or pass another run_dir."),
    "script.exhausted": "sequence exhausted: all {count} replies already given",
    "script.rule_failed": "rule {rule}: {problem}",
    "script.no_match": (
        "no rule matched request #{index} (kind={kind}, agent_id={agent_id}, "
        "tool_results={results})"
    ),
    "script.none_set": "no script set on the FakeAPI",
    "script.unreadable": "{path}: cannot read the script file: {problem}",
    "script.no_rules": "{path}: expected a non-empty list under 'rules:'",
    "script.bad_json": "{where}: invalid JSON: {problem}",
    "script.unknown_format": "{path}: unknown script format; use .json, .yaml or .yml",
    "script.no_yaml": (
        "{path}: YAML scripts need PyYAML: pip install 'flowerbox[yaml]', or use JSON"
    ),
    "script.bad_yaml": "{where}: invalid YAML: {problem}",
    "boxcli.git_failed": "git {command} failed in {workspace}: {problem}",
    "boxcli.outside_workspace": (
        "{path} is outside the workspace {workspace}, and only the workspace is "
        "mounted into the box: move the file into it, or pass -w <a folder that "
        "holds it>"
    ),
    "boxcli.weaken_and_control": "--weaken and --negative-control: pass one of them",
    "boxcli.kube_needs_run": (
        "pass the run id with --on kube: `flowerbox ps --on kube` lists them"
    ),
    "boxcli.kube_needs_repo": ("--on kube needs --repo URL: the https git remote the run works on"),
    "boxcli.kube_no_answer": (
        "run {run} waits for no answer to {question} (pending: {pending}): "
        "`flowerbox ps --on kube` lists the questions"
    ),
    "boxcli.kube_only_flag": "{flag} is for a cluster: add --on kube, or leave it out",
    "boxcli.local_only_flag": (
        "{flag} is for this machine, not a cluster: leave it out with --on kube"
    ),
    "boxcli.kube_runtime": "--runtime {runtime}: use runc or runsc",
    "boxcli.requests_flags": (
        "--requests shows the request log as it is now: without -f; --json goes with --requests"
    ),
    "boxcli.no_steps": "run {run} recorded no steps yet: nothing to draw",
    "boxcli.still_running": (
        "run {run} is still running: `flowerbox attach {run}` follows it, "
        "`flowerbox stop {run}` stops it"
    ),
    "boxcli.shell_not_resumed": "a shell is not resumed: run `flowerbox shell` again",
    "boxcli.no_answer": (
        "run {run} waits for no answer to {question} (pending: {pending}): "
        "`flowerbox ps` lists the questions and their ids"
    ),
    "boxcli.answer_refused": (
        "run {run} refused the answer: {question} was closed meanwhile (answered or timed out)"
    ),
    "boxcli.cluster_only": ("flowerbox {command} is for a run on a cluster (--on kube): {what}"),
    "boxcli.rm_here": ("a run here is its records and your workspace's runs/, yours to keep"),
    "boxcli.running_no_deliver": ("run {run} is still running: its commits come back when it ends"),
    "delivery.nothing": "the workers changed no file: there is nothing to deliver",
    "delivery.more": " and {count} more",
    "delivery.merged": "merged into your checkout from branch {branch}",
    "delivery.patch": "on branch {branch} and in the patch {patch}",
    "delivery.branch": "on branch {branch}",
    "delivery.work": (
        "the work is {where}: {commits} commit(s) on {base}, {files} file(s): {shown}{more}"
    ),
    "delivery.apply": "  apply it: {command}",
    "delivery.not_merged_goal": (
        "not merged: the run did not reach its goal; look at the branch first"
    ),
    "delivery.not_merged_git": "not merged: git said: {said}",
    "delivery.failed": "the run's work could not be delivered: {problem}",
    "delivered.taken": "delivered",
    "delivered.rejected": "refused by the run",
    "delivered.waiting": "in the run's inbox; it has not picked it up yet",
    "runbusy.who": "pid {pid} on {host}",
    "runbusy.fix": (
        '`flower status` shows it, `flower answer ID "text"` answers its '
        'questions, `flower send "text"` tells it something; stop it (Ctrl+C in '
        "its terminal, `flowerbox stop` for a box) before starting another, or "
        "pass --run-dir for a run of its own"
    ),
    "runbusy.message": (
        "another flower run is going in {run_dir} ({who}, since {since}: "
        "{doing}). Only one run at a time uses a run directory: {fix}"
    ),
    "lock.who_process": "process {pid}",
    "lock.who_another": "another process",
    "lock.timeout": (
        "{path} is still locked by {who} after {timeout} s; if that process is "
        "stuck, stop it (the lock is released when it exits) and retry"
    ),
    "git.failed": "git {command} failed: {said}",
    "step.failed": "step {step} failed: {why}",
    "step.gate_failed": "its gate did not pass",
    "status.db_busy": ("{db} is busy ({problem}): a run is writing it; retry in a moment"),
    "status.db_unreadable": (
        "{db} cannot be read as a sessions database ({problem}): it is corrupt "
        "or not flower's; move it aside (the next run starts a new one)"
    ),
    "status.rows_ignored": "{path} is not a list of rows; it was ignored",
    # -- lead: what the command lines say beside their results (saved, created, stopping)
    "say.demo_workspace": "demo workspace: {workspace}  (the model is scripted; no key is used)",
    "say.look_around": "look around: {root} (runs/ has the sessions, workspace/.flower the notes)",
    "say.step_failed": "step failed:",
    "say.wrote": "wrote {path}",
    "say.wrote_private": "wrote {path} (mode 0600)",
    "say.removed": "removed {what}",
    "say.note": "note:",
    "say.env_overrides": (
        "{key} is also set in your environment, which takes priority over this file: unset "
        "it to use the value written here"
    ),
    "say.probe_failed": "probe failed:",
    "say.box_demo_workspace": (
        "demo workspace: {workspace} (the model is scripted; no real key is used)"
    ),
    "say.image_ready": "{image} is ready (built from {context})",
    "say.control_named": (
        "negative control {name}: {breaks}; expected to FAIL: {fails}, every other probe to PASS"
    ),
    "say.control_weak": (
        "negative control: a deliberately weak container (root, default capabilities, no "
        "seccomp, host network, the Docker socket): every probe should FAIL here, and of "
        "the host-boundary checks git_hook_redirect (the others judge the host's own code, "
        "which no box changes)"
    ),
    "say.planted_left": "could not remove what the self-test planted: {what}",
    "say.probes_silent": (
        "some probes never reported: an image older than this flowerbox? run `flowerbox "
        "build`. The box's stderr ended with:\n{tail}"
    ),
    "say.host_section": "{section}: flowerbox's host code against what the box planted",
    "say.probes": "{count} probes",
    "say.host_checks": ", {count} host-boundary checks",
    "say.counted": "{counted}: {passed} PASS, {failed} FAIL",
    "say.created": "created {what}",
    "say.kube_waiting": "waiting for {run} (up to {seconds} s)",
    "say.kube_by_tag": (
        "{image} is named by its tag: pass --image NAME@sha256:... (or pull or push it "
        "here first) so what runs is what was reviewed"
    ),
    "say.stopped": "stopped {what}",
    "say.kube_review": (
        "once it ends (`flowerbox ps --on kube`), review the work: git fetch origin "
        "{ref}:refs/remotes/flowerbox/{run} && git log -p ..flowerbox/{run}"
    ),
    "say.kube_answer_anyway": "{run}: its questions are unknown ({waiting}): answering anyway",
    "say.kube_dropped": "created {what}: `flowerbox logs {run} -f --on kube` shows the run take it",
    "say.questions_unknown": "{run}: its questions are unknown: {waiting}",
    "say.no_runs": 'no flowerbox runs in {where}: `flowerbox "ask" --detach` starts one',
    "say.no_requests": "no requests logged for this run (yet)",
    "say.requests_spent": "{count} requests · ${spent}",
    "say.keeper_lost": "{run} lost its keeper: stopping it and cleaning up",
    "say.stopping": "stopping {run} (flower records its step; up to 30 s)",
    "say.stopped_unrecorded": "{run}: the agent stopped, its keeper has not recorded it yet",
    "say.stopped_resumable": "{run}: {status}; `flowerbox resume {run}` continues it",
    "say.sent_to_stopped": "{run} is stopped: it reads this when you `flowerbox resume` it",
    "launch.masked_env": (
        "{path} is hidden from the box (it shows an empty file there): credentials reach "
        "only the gateway, from your environment or ~/.config/flower/.env"
    ),
    "say.answered": "answered {ask} ({path})",
    "say.sent": "sent ({path})",
    "say.answer_with": "answer: {command}",
    # -- lang3: selftest, egress, fetch
    "verdict.identity_uid": "uid {uid} (euid {euid}), expected your uid {yours}",
    "verdict.identity_groups": (
        "gid {gid}, supplementary groups {groups}: expected your gid {yours} and no other "
        "group (a group can open what it owns, the engine's socket included)"
    ),
    "verdict.identity_root": (
        "uid 0: flowerbox runs as root, so the box does (every other restriction holds); run "
        "flowerbox as your own user, in the docker group, to avoid it"
    ),
    "verdict.identity_ok": "uid {uid}, gid {gid}, no other group: yours, not root",
    "verdict.caps_ok": "CapEff and CapBnd are 0",
    "verdict.caps": "CapEff {eff}, CapBnd {bnd}",
    "verdict.nnp_ok": "set",
    "verdict.nnp": "no_new_privs {flag}: setuid binaries work",
    "verdict.seccomp_none": "mode {mode}: no seccomp filter",
    "verdict.seccomp_no_table": (
        "no syscall table for {machine}: what the filter refuses is unknown"
    ),
    "verdict.seccomp_reached": "a filter is loaded, but these reached the kernel: {got}",
    "verdict.seccomp_ok": "mode 2; refused with EPERM: {tried}",
    "verdict.gvisor_seccomp": "gVisor's sandbox runs on the host in seccomp mode {mode}",
    "verdict.gvisor_seccomp_ok": (
        "gVisor: its sandbox runs on the host in seccomp mode 2; inside, mode {mode}: the calls "
        "a profile would refuse reach gVisor's kernel, not the host's ({tried})"
    ),
    "verdict.root_no_options": "without options",
    "verdict.root_mounted": "/ is mounted {options}",
    "verdict.root_written": "the root filesystem took a write",
    "verdict.tmp_runs": "a script written to /tmp runs",
    "verdict.tmp_noexec": "/tmp refuses to execute",
    "verdict.tmp_unchecked": "/tmp is not checked for noexec",
    "verdict.nothing": "nothing",
    "verdict.none": "none",
    "verdict.root_ok": "/ is read-only, {tmp}; writable and executable by design: {executable}",
    "verdict.engine_answers": "a Docker engine answers at {engines}",
    "verdict.sockets_unopenable": (
        "sockets the box sees but may not open (an engine's? another group or uid could): {sockets}"
    ),
    "verdict.walk_cut": "the walk was cut short ({why})",
    "verdict.no_engine": (
        "no engine among the unix sockets reachable ({entries} entries walked; sockets: {others})"
    ),
    "verdict.interfaces": "network interfaces: {names}",
    "verdict.tcp_reached": "without the proxy it reached the host's loopback",
    "verdict.ipv4_route": "the kernel has an IPv4 route out",
    "verdict.tcp_ok": "no way out without the proxy ({error})",
    "verdict.policy_passed": (
        "reached the cluster's API Service past the run's network policy: does the network "
        "plugin enforce NetworkPolicy?"
    ),
    "verdict.policy_held": "the network policy held ({error})",
    "verdict.udp_reached": "a datagram reached the host's loopback",
    "verdict.udp_route": "the kernel would route a datagram out (an IPv4 route)",
    "verdict.udp_ok": "no datagram left the box; no route out ({route})",
    "verdict.raw_opened": "opened: {what}",
    "verdict.raw_ok": "raw and packet sockets refused",
    "verdict.ipv6_route": "the kernel has an IPv6 route out",
    "verdict.ipv6_ok": "no IPv6 route ({error})",
    "verdict.no_proxy_env": "no egress proxy in the box (HTTPS_PROXY)",
    "verdict.name_not_refused": "{name} not refused ({answers})",
    "verdict.name_logged": "egress log for {name}: {decisions}",
    "verdict.name_ok": "{name}: 403 for CONNECT and plain HTTP, logged deny",
    "verdict.no_proxy": "no egress proxy in the box",
    "verdict.proxy_reached": "the proxy reached the host's loopback",
    "verdict.targets_open": "not refused: {open}; no single deny logged: {unlogged}",
    "verdict.targets_ok": "refused and logged: {targets}",
    "verdict.writable": "writable inside: {paths}",
    "verdict.renamed": "renamed inside: {paths}",
    "verdict.not_in_workspace": "not in the workspace: {paths}",
    "verdict.nothing_protected": (
        "nothing protected exists here to try (no .git, Dockerfile...): run selftest in a git "
        "repository"
    ),
    "verdict.protected_ok": "read-only, not renamed: {paths}",
    "verdict.parent_renamed": (
        "renamed inside (a protected path moves along, its name is free): {paths}"
    ),
    "verdict.no_parents": "no protected path lies below a folder here",
    "verdict.parents_ok": "not renamed: {paths}",
    "verdict.gitfile_writable": (
        "the workspace's .git file (a linked worktree) can be rewritten or moved inside: a "
        "`gitdir:` of the box's own would take your git there"
    ),
    "verdict.gitfile_ok": ".git is a file (a linked worktree): read-only",
    "verdict.git_is": "the workspace's .git: {git}",
    "verdict.repo_reached": "reached your repository: {what}",
    "verdict.git_moved": ".git moved away inside, {replace}",
    "verdict.git_ok": (
        "commondir: {commondir}, not in your repository; .git not replaced ({replace})"
    ),
    "verdict.sudo_gave": "sudo -n gave uid {uid}",
    "verdict.setuid_root": "uid 0 already (flowerbox runs as root); CapBnd 0: nothing to gain",
    "verdict.sudo_refused": "sudo refused",
    "verdict.sudo_absent": "sudo absent",
    "verdict.su_unseen": "could not observe su's credentials",
    "verdict.no_su": "no setuid-root su; {sudo}",
    "verdict.su_gained": "su (setuid root) ran as euid {euid}, CapEff {eff}",
    "verdict.su_ok": "su (setuid root) gained nothing: euid {euid}, no capabilities; {sudo}",
    "verdict.left": "left behind: {what}",
    "verdict.survivor_ok": "nothing outlived the box (process: {process}, container: {container})",
    "verdict.kernel_seen": "the host runs the box as {process} (uid {uid})",
    "verdict.kernel_unseen": "the box's process is not visible here ({error})",
    "verdict.boot_unknown": "boot times unknown (box {box}, host {host})",
    "verdict.booted_after": "its kernel booted {seconds} s after the host's",
    "verdict.booted_with": "its kernel booted when the host's did ({btime})",
    "verdict.runc_yet": "runc was asked for, yet {seen}",
    "verdict.runc_ok": (
        "the host's kernel (runc, as asked; --runtime runsc puts gVisor's between): {seen}; "
        "{booted}"
    ),
    "verdict.runsc_default": "runsc's default",
    "verdict.gvisor_ok": (
        "gVisor ({platform} platform): {seen}, none of the agent's processes is a host "
        "process; {booted}"
    ),
    "verdict.gvisor_log": "{why}; its log: {log}",
    "verdict.not_gvisor": "runsc was asked for, but {seen}; {booted}: not gVisor's kernel",
    "verdict.pids_unlimited": "{started} threads started, no limit hit",
    "verdict.pids_ok": "task {task} refused (limit {limit})",
    "verdict.silent": "no observation: the probe did not report",
    "verdict.no_observation": "no observation",
    "verdict.broke": "the probe broke: {why}",
    "verdict.unreadable": "unreadable observation ({problem})",
    "verdict.hung": "hung (no answer in {seconds} s)",
    "verdict.call_hung": "{what} {hung}",
    "verdict.dotenv_yours": (
        "your own .env is here, empty and read-only in the box: the redirect was refused"
    ),
    "verdict.dotenv_planted": "a .env sending the key to the probe server, with a PYTHONPATH",
    "verdict.dotenv_writable": "the workspace .env could be written in the box ({plant})",
    "verdict.dotenv_yielded": "the credential lookup took {keys} from it",
    "verdict.dotenv_from": "{keys} came from ./.env",
    "verdict.server_got": "the probe server got {got}",
    "verdict.sitecustomize_ran": "its sitecustomize.py ran on the host",
    "verdict.dotenv_ok": (
        "{what}; flowerbox's credential lookup read nothing from ./.env, nothing reached the "
        "probe server, no code of it ran"
    ),
    "verdict.forged_listed": "ps lists it",
    "verdict.forged_found": "stop/resume find it",
    "verdict.forged_blocks": "a new run is refused for it",
    "verdict.outside_changed": "the folder outside it names changed: {names}",
    "verdict.forged": "a running run {run} forged in runs/flowerbox: {problems}",
    "verdict.forged_ok": (
        "a running run {run} forged in runs/flowerbox/ (naming a folder outside) is no run to "
        "the host: not listed, not found by its id, blocks nothing"
    ),
    "verdict.reading_questions": "reading the questions",
    "verdict.reading_asks": "reading asks.json",
    "verdict.questions_read": "questions read through the link: {value}",
    "verdict.questions_broke": "reading the questions broke: {value}",
    "verdict.zero_read": "asks.json -> /dev/zero was read ({value})",
    "verdict.answer_dropped": "an answer was dropped through the inbox link ({value})",
    "verdict.written_outside": "written in the folder outside: {names}",
    "verdict.links_ok": (
        "asks.json -> /dev/zero: no question, refused as a link in {seconds} s; an answer "
        "dropped into inbox -> a folder outside: refused, nothing written there"
    ),
    "verdict.fifos_in_kernel": (
        "the box made its FIFOs, yet none is on the host: its kernel keeps them (gVisor's "
        "FIFOs in a bind mount live in its own kernel), so no host read can hang on one"
    ),
    "verdict.events_file": "the events file",
    "verdict.gateway_meter": "the gateway meter",
    "verdict.fifo_hung": "reading {what} (a FIFO) {hung}",
    "verdict.fifo_read": "{what}, a FIFO, was read as a file ({value})",
    "verdict.cost_hung": "the run's cost {hung}",
    "verdict.fifos_ok": (
        "FIFOs at the events file and the gateway meter: refused, not opened for reading, in "
        "{seconds} s; the cost is read from the host's own ledger"
    ),
    "verdict.hook_no_git": "not tried: the workspace is no git repository (run selftest in one)",
    "verdict.not_planted": "not planted: {plant}",
    "verdict.and": " and ",
    "verdict.status_ran": "your `git status` ran the box's {ran}",
    "verdict.status_failed": "your `git status` failed ({code}: {stderr})",
    "verdict.hook_folder": "a commondir naming a folder with a hook and core.fsmonitor",
    "verdict.hook_file": "your .git is a file (a linked worktree), read-only in the box",
    "verdict.hook_ok": "{planted}: your .git has no commondir, your `git status` ran no hook",
    "verdict.no_git_plant": "the box did not report its git plant",
    "verdict.host_silent": "the host side did not report: {why}",
    "egress.listed": "listed: {entry}",
    "egress.kind.public": "public",
    "egress.kind.cloud metadata": "cloud metadata",
    "egress.kind.loopback": "loopback",
    "egress.kind.link-local": "link-local",
    "egress.kind.unique-local": "unique-local",
    "egress.kind.private": "private",
    "egress.kind.not public": "not public",
    "egress.an_address": "an IP address ({kind}) ",
    "egress.a_name": "a {kind} name ",
    "egress.wildcard_note": "; a wildcard never covers it",
    "egress.numeric_name": "a numeric name that reads as an IP address; use the address",
    "egress.no_address": "resolves to no address",
    "egress.resolves_to": (
        "resolves to {address} ({kind}), which is not in the allowlist (--allow {address} to "
        "permit)"
    ),
    "egress.resolved": "resolved to public or listed addresses",
    "egress.empty_list": "the allowlist, which is empty: no network",
    "egress.the_list": "the allowlist",
    "egress.not_listed": "{what}not in {where}{note} (--allow {entry} to permit)",
    "reach.more": "; and {count} more",
    "reach.refused": (
        "this request makes the API reach beyond the box ({shown}); refused because the API "
        "would fetch or call out with the run's key. Pass --allow-api-fetch to allow it, or "
        "--allow HOST for a URL source's host (docs/gateway.md, No way out through the API)"
    ),
    "reach.mcp_servers": "mcp_servers ({servers})",
    "reach.container": "a container",
    "reach.tools_not_list": "tools that are not a list of objects",
    "reach.server_tool": "the server tool {tool}",
    "reach.unknown_source": "{block} source of a kind it does not know",
    "reach.a_block": "a block",
    "reach.file_id": "{block} of a file_id",
    "reach.server_call": "a {block} block (a call the API makes)",
    "reach.a_blocks": "a block's",
    "reach.source_from": "{block} source from {url}",
    "reach.source_file": "{block} source of a file_id",
    "reach.servers": "{count} server(s)",
    "verdict.pod_log_over": "the probe Pod's log was over {limit} bytes: nothing in it was judged",
    "verdict.reported_twice": (
        "reported twice: something else in the Pod printed a line in this probe's name"
    ),
    "verdict.process": "process {pid}",
    "verdict.container": "container {name}",
    "verdict.git_replaced": ".git was replaced",
    "verdict.commondir_appeared": ".git/commondir appeared",
    "egress.unsupported_method": "Unsupported method ({method})",
    "egress.send_connect": "{problem}; send CONNECT host:port",
    "egress.https_plain": (
        "an https:// URL in plain form; send CONNECT host:443 (clients do when HTTPS_PROXY is set)"
    ),
    "egress.not_proxy_request": (
        "not a proxy request; send an absolute URL (http://host/path) or CONNECT host:port"
    ),
    "egress.cannot_resolve": "cannot resolve {host}: {problem}",
    "egress.cannot_reach": "cannot reach {where}: {error}",
    # -- the step's own budget stop
    "runtime.budget_spent": "the run's budget of ${budget} is spent",
}
