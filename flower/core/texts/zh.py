"""The zh texts: the seeds' own prompts, rule texts and lines, byte for byte.

Keys are `<where>.<what>`; `{name}` placeholders are filled by flower.core.lang.text. The en
table (flower.core.texts.en) has exactly these keys and placeholders.
"""

ZH: dict[str, str] = {
    # -- the roles' rule texts (flower.core.roles) ---------------------------------------
    "rules.coordinator": """\
你是协调者：拆分任务、派活、读汇报、做决定，但不亲自动手。
- 改文件、跑命令都用 Agent 工具交给子代理；主线程的 Bash/Write/Edit 会被拦下。
- 子代理看不到你的系统提示和工作台索引，任务说明是它唯一的信息来源。每份任务说明都写清：\
目标、验收标准、工作台的位置（照抄系统提示里「工作台在 …」给出的路径），\
以及「超过 2000 字符的产出写进工作台的 artifacts/，回复里只给路径和结论」。
- 子代理交回后，对照验收标准核对；不满足就写明差距再派一次。
- 关键决定让子代理写进工作台的 notes/，一个决定一个文件。""",
    "rules.worker": """\
你是执行者：按任务说明把活干完。
- 先看清任务里的目标和验收标准，做完逐条自查。
- 超过 2000 字符的产出（报告、数据、日志）写进任务说明给出的工作台 artifacts/ 目录，\
回复里只给路径和结论。
- 最后的回复就是交给协调者的汇报：做了什么、结果在哪、验收标准是否满足、还剩什么没解决。
- 卡住了就说卡在哪、试过什么；不要编造结果。""",
    "rules.clarify": """\
你是澄清者：动手之前先把需求问清楚。你只提问、只读，不做任何修改。
- 先读工作区里与需求相关的文件，能自己查清的不要问人。
- 真正需要人来定的，用提问工具问，一次问一件事，尽量给出可选项。
- 没人回答时，按你的判断取一个合理的假设，写进「未知与假设」，不要重复提问。
- 最后只输出下面四节，标题一字不改、各占一行，不要用代码块，不要写别的：
{brief}
- 「目标」一两句话；「验收标准」逐条可检查；「边界」写清不做什么；\
「未知与假设」列出仍不确定的点和你采用的假设（没有就写「无」）。""",
    "rules.judge": """\
你是裁判：对照冻结的目标独立判定，不替任何人干活。你只读（允许时可以跑命令验证），不改任何文件。
- 先看清你在什么环境里：平台、能跑什么、不能跑什么。
- 定目标时，只输出下面两节，标题一字不改、各占一行，不要用代码块：
{goal}
  「验收清单」每条一行、以 - 开头、可以逐条检查；在这个环境里无法验证的条目，\
在行首标上 [此环境无法验证:原因]。
- 判定时，只输出下面三节，标题一字不改、各占一行，不要用代码块：
{verdict}
  「结论」只写一个词：达成、未达成、无法达成 三选一。拿不准就是未达成；\
环境根本验证不了才是无法达成。「理由」说依据；\
「未通过项」逐条列出没通过的清单条目（每条以 - 开头）。
- 不要因为「看起来差不多」就判达成：每一条都要有依据。""",
    "rules.oracle": """\
你是旁路问答：运行还在进行，有人问进展。你只读不写。
- 先看工作台的 INDEX.md、notes/ 和 artifacts/，需要时再读具体文件。
- 回答简短具体：做到哪了、依据是哪个文件；不确定就说不确定。
- 你的回答不会进入这次运行的上下文，不要给运行中的代理下指令。""",
    "role.this": "这个角色",
    "role.oracle": "旁路问答",
    "role.coordinator": "协调者",
    "role.coder": "实现者:按任务说明改代码并验证",
    "role.coder_prompt": "你负责实现。每改一处就跑一次验证,别攒到最后。",
    # -- the starter flow (flower.workflow.starter) --------------------------------------
    "starter.clarify": "这是人提出的诉求,先把它澄清成四节需求:\n\n{ask}",
    "starter.clarify_resume": "继续澄清。问清楚之后,按规定的四节输出最终的需求。",
    "starter.goal": "根据下面冻结的需求,设定目标和验收清单:\n\n{brief}",
    "starter.verify": (
        "独立判定这一轮的工作是否达成了冻结的目标。自己去工作区核对,不要只信汇报。\n\n"
        "{goal}\n\n<本轮汇报>\n{report}\n</本轮汇报>"
    ),
    "starter.review_note": (
        "\n\n这次运行的成果在分支 {branch} 上,工作区本身不会被改动;分支的最新状态已检出在 "
        "{path}:到那里核对。"
    ),
    "starter.work": "按下面冻结的需求和目标完成工作。\n\n{brief}\n\n{goal}",
    "starter.wake": (
        "人在唤醒这次运行时补充了:\n\n{said}\n\n需求和目标已按这句话更新,照新的标准继续工作。"
    ),
    "starter.carry_on": "[flower 被停掉后又启动了:从现在的进度接着做,汇报过已完成的就是完成了。]",
    "starter.carry_on_added": "人在需求里补充过:\n{said}",
    "starter.wake_label": "唤醒时追加",
    "starter.ambiguous": "裁判没有给出可识别的结论,按未达成处理。",
    "starter.accept": "接受这个结果,就这样继续",
    "starter.amend": "修改目标",
    "starter.retry": "你判断错了,继续做",
    "starter.no_ask": "要给一句诉求,例如 flower '帮我做一个 X'",
    "starter.unverifiable": "{count}/{total} 条验收在这个环境里无法验证",
    "starter.no_runtime": "拿不到 Runtime,无法判定目标",
    "starter.unreachable": "裁判认为目标无法达成:{reason}\n怎么办?",
    "starter.no_reason": "(没有给出理由)",
    "starter.unreachable_unanswered": "目标被判为无法达成,也没有人回答",
    "starter.new_goal": "新的目标是什么?(会记进目标文件,之后按它判定)",
    "starter.no_new_goal": "要修改目标,但没有人给出新的目标",
    "starter.human_said": "{reason}\n人说:{answer}",
    # -- the human channel (flower.core.human) -------------------------------------------
    "human.timeout": (
        "无人应答。按你自己的判断继续,"
        "并把这个问题和你采用的假设写进「未知与假设」那一段。不要重复提问,也不要停在这里。"
    ),
    "human.over_budget": (
        "提问次数已用完,这个问题没有发给人。按你自己的判断继续,"
        "并把这个问题和你采用的假设写进「未知与假设」那一段。不要重复提问,也不要停在这里。"
    ),
    "human.declined": (
        "对方不回答这个问题。按你自己的判断继续,"
        "并把这个问题和你采用的假设写进「未知与假设」那一段。不要重复提问,也不要停在这里。"
    ),
    "human.declined_reason": "{declined}\n对方说:{reason}",
    "human.invalid": (
        "问题是空的,没有发给人。要问就写一个具体的问题(可附选项);否则按你自己的判断继续。"
    ),
    "human.empty_inbox": "收件箱是空的:人没有发来新消息。继续手上的工作。",
    "human.new_mail": "人发来 {count} 条新消息(已标为已读):\n",
    "human.ask_tool": (
        "向人提一个问题,等他回答(调用会一直等到回答、拒绝或超时)。只问你自己判断不了、"
        "而答案会改变做法的事;给得出选项就附上 options。没人回答时会收到一段说明,照做即可。"
    ),
    "human.inbox_tool": (
        "查看人主动发来的新消息(不等待;没有新消息时立即返回一句说明)。"
        "每开始一个阶段、收尾之前都看一次:人可能补充或修改了要求。"
    ),
    "human.question_field": "要问的问题,一句话说清",
    "human.options_field": "可选答案",
    "human.added": "人补充",
    "human.amend_line": "{label}（{stamp}）：",
    "log.title": "# 问答记录\n",
    "log.question": "- 问题:{text}",
    "log.options": "- 选项:{text}",
    "log.answer": "- 回答:{text}",
    "log.outcome": "- 结果:{text}",
    "log.waited": "- 等待:{seconds} s",
    "log.empty": "(空)",
    "log.timeout": "无人应答,按模型自己的判断继续",
    "log.declined": "人拒绝回答",
    "log.over_budget": "超出提问次数,没有发给人",
    "log.invalid": "问题为空,没有发给人",
    # -- the workbench (flower.core.workbench) -------------------------------------------
    "workbench.index": "# 工作台索引",
    "workbench.generated": "（自动生成，请勿手改）",
    "workbench.empty": "- (空)",
    "workbench.more": "- …… 另有 {count} 个较早的文件",
    "workbench.added": "系统提示里的工作台索引写好之后,工作台上新添了:\n{entries}",
    "workbench.where": "工作台在 {root}/。",
    "workbench.external": "它在工作区之外，请一律用绝对路径访问。",
    "workbench.rules": "规则：",
    "workbench.scripts": "1. 要重复运行的脚本放进 {scripts}/，第一行写 `# desc: 一句话说明`。",
    "workbench.artifacts": (
        "2. 超过 {chars} 字符的产出（报告、数据、日志）写进 {artifacts}/，对话里只给路径和结论。"
    ),
    "workbench.notes": "3. 关键决定写进 {notes}/，一个决定一个文件。",
    # -- the guards (flower.core.guard) --------------------------------------------------
    "guard.whitelist": (
        "{role}没有 {tool} 工具。这是有意的设计，不是漏配。"
        "请把结论直接写在回复正文里，框架会从那里取走；不要换个说法绕过。"
    ),
    "guard.delegate": (
        "主线程不亲自动手（{tool} 已拦下）。请用 Agent 工具委派给子代理："
        "在任务里写清目标和验收标准，并要求它把长产出写进 {artifacts}，只回报路径和结论。"
    ),
    "guard.glance": "只读的查看命令（git status、ls、cat 这类）可以自己跑。",
    "guard.artifacts": "工作台的 artifacts/",
    "guard.spill": (
        "[输出过长（{chars} 字符），全文已存到 {path}，需要时用 Read 分段读取。"
        "以下是前 {preview} 个字符]\n"
    ),
    # -- handoff (flower.core.handoff, flower.core.takeover) -----------------------------
    "handoff.step": "步骤「{step}」",
    "handoff.this_step": "这个步骤",
    "handoff.forked": (
        "这条消息之前的，是这个步骤最初交下来的任务，和上一代会话的第一轮往来；"
        "那个会话其余的部分不在这里。"
    ),
    "handoff.resume": (
        "这是{whose}上一代会话留下的交接：它的上下文满了，由你这个全新的会话接着做。"
        "你看不到之前的对话，下面就是它交给你的全部内容。\n\n"
        "{block}\n\n"
        "先按「现场」核对工作区的实际状态，再从「下一步」接着做；「死路」里的路不要再走。"
    ),
    "handoff.write": """\
上下文快满了（已用 {used} / 窗口 {window} tokens）。这个会话到此为止，同一步骤将由一个全新的\
会话接手；它看不到这段对话，只能看到你现在写的交接。

各节写什么：
- 正在做（必填）：手上的活做到哪一步了。
- 已定结论：已经确定、不必再讨论的结论和决定，附上依据。
- 死路：真正试过且走不通的路，以及为什么走不通；没有就留空，不要编。
- 下一步（必填）：接手的会话第一件该做的事，越具体越好。
- 现场：接手需要知道的现场：改过的文件、关键路径、要跑的命令、没跑完的东西。

只输出下面这五个标题行和各自的内容，标题一字不改，每个单独成行；除此之外什么都不要写，\
不要用代码块。

{skeleton}""",
    "handoff.why": "（{why}）",
    "handoff.degraded_doing": "上一代会话没能写出交接{why}，它做到了哪一步不得而知。",
    "handoff.degraded_next": (
        "先核对工作区的实际状态（文件、git 状态、工作台的 notes/ 和 artifacts/），"
        "弄清哪些已经做完、哪些做了一半；再接着完成原始任务（开头部分见「现场」）。"
    ),
    "handoff.incomplete": "上一代会话没有写出完整的交接(缺少「正在做」或「下一步」)",
    "handoff.writing": "上下文 {used}/{window},正在写交接",
    "handoff.done": "交接完成,新会话接手",
    "handoff.done_at": "交接完成,新会话接手:{path}",
    "runtime.will_not_heal": (
        "这一步停下:Claude Code CLI 两次在第一个 API 请求之前以退出码 {code} 退出,错误相同,"
        "等待改变不了它(修好后再运行):{cause}"
    ),
    "runtime.near_handoff": "上下文 {used}/{window},接近交接线 {at}",
    "runtime.interrupt_note": (
        "(人打断了你,说了上面这些话。如果一个正在执行的工具调用返回了 interrupted 或 cancelled,"
        "那是打断的正常副作用,不是环境故障:还需要的话就重新执行。)"
    ),
    "runtime.carry_on_note": (
        "(人打断了你,但什么也没说:从你停下的地方继续你的任务,不要等待指示。如果一个正在执行的"
        "工具调用返回了 interrupted 或 cancelled,那是打断的正常副作用,不是环境故障:还需要的话"
        "就重新执行。)"
    ),
    "document.placeholder": "(未填)",
    # -- the stores' replacements (flower.stores, through Runtime) ----------------------
    "stores.spilled": "[工具结果已归档:{chars} 字符。完整内容在 {path},需要时用 Read 读取]",
    "stores.expired": "[{cmd} 的结果已过期(第 {age} 轮前),当前状态可能已变。需要请重新执行]",
    "stores.orphan": "[工具调用在返回结果前被中断,没有结果。需要请重新执行]",
    # -- a worker cut short, handed on (flower.core.cutwork) -------------------------------
    "cut.coordinator": (
        "[flower 被停掉时执行者 {agent}({description})还在干活,汇报没有回来。它已经做了:\n"
        "{calls}\n别让人再做一遍:你接下来为这项任务派的执行者会看到这份清单,对照磁盘核对。]"
    ),
    "cut.worker": (
        "这项任务({description})之前的执行者在汇报前被中断了(flower 被停掉),它在 {cwd} 里干活。"
        "按它的记录,它已经做了:\n{calls}\n先对照磁盘核对这些,从那里接着做,不要从头再来。"
        '标着"可能已执行"的调用可能做了也可能没做:重做之前先检查。'
    ),
    "cut.handoff_coordinator": (
        "[上一代会话交接时执行者 {agent}({description})还在干活,它被中断了,汇报没有回来。"
        "它已经做了:\n{calls}\n别让人再做一遍:你接下来为这项任务派的执行者会看到这份清单,"
        "对照磁盘核对。]"
    ),
    "cut.handoff_worker": (
        "这项任务({description})之前的执行者在汇报前被中断了(派它的会话上下文满了,交接了),"
        "它在 {cwd} 里干活。按它的记录,它已经做了:\n{calls}\n先对照磁盘核对这些,从那里接着做,"
        '不要从头再来。标着"可能已执行"的调用可能做了也可能没做:重做之前先检查。'
    ),
    "cut.done": "{n}. {call} -> {result}",
    "cut.failed": "{n}. {call} -> 失败:{result}",
    "cut.open": "{n}. {call} -> 没有结果:中断时它正在执行,可能已执行",
    "cut.none": "(还没有工具调用)",
    # -- the goal (flower.core.goal) -----------------------------------------------------
    "goal.feedback": "评审认为目标还没有达成。请在现有工作的基础上接着做，不要从头再来。",
    "goal.feedback_reason": "评审的理由：\n{reason}",
    "goal.feedback_failed": "未通过项：\n{items}",
    "goal.revision": "修订（{stamp}，与上文冲突时以此为准）：\n{quoted}",
    # -- resilience (flower.core.resilience) ---------------------------------------------
    "resilience.resume": (
        "你上一轮的工作因为网络或服务中断被打断了。先确认工作区的实际状态(刚才的操作可能已经完成,"
        "也可能没有),然后从中断处继续,不要从头再来。"
    ),
    "resilience.offline": "{name} 不可达,等待恢复(最多 {minutes} 分钟)",
    "resilience.back": "{name} 恢复,继续",
    # -- the terminal (flower.cli.interact, flower.cli.render) ---------------------------
    "terminal.oracle_prompt": "有人在运行中问:{question}\n\n最近的事件(最新的在最后):\n{events}",
    "terminal.no_events": "(无)",
    "terminal.oracle_wait": "等旁路问答答完再退出(Ctrl+C 不等)。",
    "terminal.interrupt": (
        "中断:输入要告诉代理的话,回车后它在同一个会话里接着干"
        "(正在跑的工具调用会被打断,子代理手上的半成品会丢);直接回车=只是打断;再按一次 Ctrl+C 退出。"
    ),
    "terminal.interrupted": "已打断,代理会在同一个会话里接着干。",
    "terminal.oracle_failed": "旁路问答失败:{error}",
    "terminal.oracle_said": "旁路问答:{answer}",
    # -- the report (flower.cli.picture) ---------------------------------------------
    "report.title": "flower 运行 · {workspace} · {status} · {cost}",
    "report.subtitle": "{workspace} · 开始于 {start} · 用时 {took} · 进程 {runs}",
    "report.outcome.ok": "成功",
    "report.outcome.failed": "失败",
    "report.outcome.achieved": "达成",
    "report.outcome.not_yet": "未达成",
    "report.outcome.unreachable": "无法达成",
    "report.outcome.unfinished": "未完成",
    "report.outcome.empty": "空",
    "report.outcome.error": "出错",
    "report.outcome.denied": "被拒绝",
    "report.outcome.open": "无结果",
    "report.mark.fault": "故障",
    "report.mark.retry": "重试",
    "report.mark.handoff": "交接",
    "report.mark.reset": "压缩",
    "report.mark.message": "消息",
    "report.key.done": "成功 / 达成",
    "report.key.waiting": "等你回答",
    "report.key.tool": "工具调用",
    "report.lane.human": "人",
    "report.lane.events": "事件",
    "report.lane.tools": "· 工具调用",
    "report.worker": "子代理",
    "report.chart.cost": "花费(美元)",
    "report.chart.context_share": "上下文(占 {window} token 的百分比)",
    "report.chart.context": "上下文(token)",
    "report.table.verdicts": "判定",
    "report.table.steps": "步骤",
    "report.table.tools": "工具调用",
    "report.table.waits": "等人回答",
    "report.table.marks": "故障、重试、交接",
    "report.table.problems": "未读取",
    "report.table.none": "无",
    "report.column.step": "步骤",
    "report.column.verdict": "判定",
    "report.column.reason": "理由",
    "report.column.at": "时间",
    "report.column.outcome": "结果",
    "report.column.start": "开始",
    "report.column.took": "用时",
    "report.column.attempts": "尝试",
    "report.column.cost": "花费",
    "report.column.context": "上下文",
    "report.column.error": "错误",
    "report.column.calls": "调用",
    "report.column.tools": "工具(次数)",
    "report.column.id": "编号",
    "report.column.asked": "提问于",
    "report.column.waited": "等待",
    "report.column.question": "问题",
    "report.column.kind": "类别",
    "report.column.what": "内容",
    "report.column.problem": "问题",
    "cli.exclude_prompt": (
        "flower 会在这里保存 {shown}:把它们加进 .git/info/exclude,让 git status 忽略它们"
        "(只对这个克隆)?"
    ),
    "cli.excluded": ("已把 {shown} 加进 {path}(这个克隆里 git 会忽略它们;删掉这几行即可撤销)"),
    "cli.stopped_at_prompt": ("已中断"),
    "cli.mistyped_prompt": (
        "{word!r} 看起来是 `{prog} {meant}` 打错了。要以 {word!r} 为完整需求开始一次运行吗?"
    ),
    "status.none_started": "还没有步骤开始",
    "status.sessions": "会话",
    "status.session": "会话",
    "status.steps": "步骤",
    "status.entries": "条目",
    "status.subagents": "子代理",
    "status.last_write": "最后写入",
    "status.total": "总花费:${cost}",
    "status.asides": "(另有旁路问答 ${cost})",
    "status.error": "错误",
    "status.waiting": "等你回答",
    "status.id": "编号",
    "status.question": "问题",
    "status.options": "选项",
    "status.to_answer": '回答:flower answer <编号> "..." --run-dir {run_dir}',
    "status.workbench": "工作台 {path}:{counts}",
    "status.problem": "问题",
    "status.run": "运行 {run_id}",
    "status.pid": "进程 {pid}",
    "status.now": "正在 {name}(已花 ${cost})",
    "status.waiting_for": "等你回答:{ids}",
    "status.step": "步骤",
    "status.ok": "成功",
    "status.attempts": "尝试",
    "status.cost": "花费",
    "status.turns": "轮次",
    "status.time": "时间",
    "status.resumed": "已续跑",
    "status.retired": "{count} 个会话已退役",
    "status.running": "运行中",
    "status.waiting_human": "等人回答",
    "status.done": "完成",
    "status.stopped": "已停止(可续跑)",
    "status.lost": "失联:进程已死(可续跑)",
    "status.yes": "是",
    "status.no": "否",
    "status.interrupted": "被打断",
    "analyze.steps": "步骤",
    "analyze.session": "会话",
    "analyze.sessions": "会话及其子代理",
    "analyze.calls": "调用",
    "analyze.in": "输入",
    "analyze.out": "输出",
    "analyze.cache": "缓存",
    "analyze.tools": "工具",
    "analyze.deny": "拒绝",
    "analyze.err": "出错",
    "analyze.cmpct": "压缩",
    "analyze.no_sessions": "sessions.db 里没有会话",
    "analyze.total": (
        "合计:{calls} 次 API 调用,输入 {tokens_in} token,输出 {tokens_out},缓存读 {cached},"
        "花费 {cost};{errors} 次 API 错误,{compactions} 次压缩"
    ),
    "analyze.tool": "工具",
    "analyze.denied": "被拒",
    "analyze.tool_calls": "工具调用",
    "analyze.chars": "字符",
    "analyze.call": "调用内容",
    "analyze.largest": "最大的工具结果",
    # -- 实时状态行和结束行
    "live.round": "第 {index}/{total} 轮",
    "live.context": "上下文 {amount}",
    "live.resumed": "(续跑)",
    "live.denied": "被拒绝:{text}",
    "live.you_said": "你说:{text}",
    "live.agent_read": "代理已读:{text}",
    "end.line": "{status} · {spent} · 退出码 {code}",
    "end.with_before": "(连同它接续的运行共 ${total})",
    "end.drawn": "运行图:{command}",
    "end.stopped": "已停止({by});在这里运行 `flower resume` 可继续",
    "end.run_status": "{status},退出码 {code}",
    "outcome.achieved": "达成",
    "outcome.not_achieved": "未达成",
    "outcome.done": "完成",
    "outcome.failed": "失败",
    "outcome.needs_human": "需要人",
    "outcome.stopped": "已停止",
    "outcome.error": "出错",
    "outcome.killed": "被杀掉",
    "outcome.lost": "失联",
    "outcome.running": "运行中",
    # -- flower 拒绝时(退出码 2)给人看的话:问题,最后一个冒号之后是怎么办
    "error.label": "错误：",
    "error.usage_fix": "加 --help 运行这个命令，看它接受什么",
    "error.see_help": "`{command} --help` 会说明它接受什么",
    "error.workspace_not_folder": "工作区 {path} 不是文件夹：先创建它，或用 -w <文件夹> 指定",
    "error.workspace_refused": (
        "不在 {path} 里工作，因为它是{why}："
        "请在项目文件夹里运行 flower（或用 -w <项目文件夹> 指定）"
    ),
    "error.why_system": "系统文件夹",
    "error.why_undecodable": "名字不是合法 UTF-8 的文件夹（Claude Code CLI 无法在那里工作）",
    "error.why_home": "你的主目录",
    "error.budget": "{value} 美元不是预算：请给出大于 0 的数，或不加这个选项（不设上限）",
    "error.empty_model": "模型名为空：请给出模型 id 或别名（sonnet、opus……），或不加 --model",
    "error.no_run_dir": (
        "{path} 处没有运行目录：请给出某次 flower 运行的 run_dir"
        "（默认 ./runs，或你当时给的 --run-dir）"
    ),
    "error.workspace_missing": "工作区 {path} 不是文件夹：先创建它，或给出一个已有的文件夹",
    "error.workspace_undecodable": (
        "工作区 {path} 的名字不是合法 UTF-8，Claude Code CLI 无法在其中工作：请改名"
    ),
    "error.isolated_not_git": (
        "工作者 {worker} 隔离在 git 工作树里，但 {path} 不是 git 仓库：在那里运行 `git init`，"
        "或取消隔离（worker(..., isolate=False) / --no-isolate）"
    ),
    "error.isolated_no_commit": (
        "工作者 {worker} 在从你最后一次提交建出的 git 工作树里工作，而 {path} 还没有任何提交："
        "先提交一次（`git commit --allow-empty -m start`），或取消隔离（--no-isolate）"
    ),
    "error.run_dir_undecodable": "run_dir {path} 的名字不是合法 UTF-8：请换一个",
    "error.run_dir_is_file": "run_dir {path} 是个文件：请给出文件夹（或一个新路径）",
    "error.dotenv_unreadable": (
        "读不了这个 .env 文件（{problem}），flower 要从中读取设置：请把它改成可读的 UTF-8 文本，"
        "或把它移走"
    ),
    "error.dotenv_missing": "没有这个 .env 文件：请检查你给出的路径",
    "error.dotenv_flower_env": (
        "没有这个 .env 文件，但 FLOWER_ENV 指向它：请改正路径，或取消 FLOWER_ENV"
    ),
    "error.no_credentials": (
        "没有凭据：ANTHROPIC_API_KEY 和 ANTHROPIC_AUTH_TOKEN 都没有设置或为空。\n"
        "运行 `flower setup`，它会把密钥写到 {path}；\n"
        "或者在 ./.env 里写 ANTHROPIC_API_KEY=...，或在 shell 里 export 它；\n"
        "或者设置 FLOWER_ENV=/path/to/.env，指向你自己的文件。"
    ),
    "fix.credentials": (
        "运行 `flower setup`（它把密钥存到 flower 和 flowerbox 都会读的地方），"
        "或在 ./.env 或环境变量里设置 ANTHROPIC_API_KEY"
    ),
    "error.no_ask": (
        '没有需求：说出你要做什么，例如 flower "加一个 --verbose 选项"'
        "（只有需求书已完整的运行可以不给需求继续：`flower resume`）"
    ),
    "error.finish_unknown": "--finish {value} 不是 {values} 之一",
    "error.finish_needs_isolate": (
        "--finish {value} 只用于隔离的运行：不加 --isolate 时工作者直接改你的检出；"
        "请加上 --isolate，或去掉 --finish"
    ),
    "error.no_prompt": '提示为空：说出代理该做什么，例如 flower once "给 parse() 加一个测试"',
    "error.not_a_file": "{file} 不是文件：请给出一个 Python 文件的路径",
    "error.not_python": "{file} 无法作为 Python 导入",
    "error.no_workflow": (
        "{file} 没有定义 Workflow：请在模块顶层加上 `workflow = Workflow([...])` "
        "或 `def build() -> Workflow`"
    ),
    "error.nothing_to_resume": (
        '{ws} 里没有可续跑的：这里没有需求书完整或记录了需求的运行（用 `flower "需求"` 开始一次）'
    ),
    "error.no_such_question": (
        "{run_dir} 里没有在等的问题 {id}（{known}）；"
        "`flower status` 会列出它们，--run-dir 可换一次运行"
    ),
    "error.no_run_here": (
        "{run_dir} 里没有运行（没有清单、会话或问题）：请用 --run-dir <那次运行的文件夹> 指定"
    ),
    "error.not_git": (
        "{path} 不是 git 仓库，而隔离的工作者需要 git 工作树：在那里运行 `git init`（并提交一次），"
        "或加 --no-isolate"
    ),
    "error.mistyped": (
        "{quoted} 看起来是 `{prog} {meant}` 打错了，所以没有开始运行。"
        "如果它真的是需求，请明说：`{prog} {ask} {word}`"
    ),
    "error.mistyped_declined": "什么也没有开始；你是想运行 `{prog} {meant}` 吗？",
    "error.waiting_ones": "在等的是：{ids}",
    "error.none_waiting": "没有在等的问题",
    # -- flowerbox 拒绝时(退出码 2)给人看的话
    "box.workspace_not_folder": "工作区 {ws} 不是文件夹：请用 -w <项目文件夹> 指定",
    "box.system_folder": (
        "不把 {ws} 挂进容器，因为它是{why}："
        "请在项目文件夹里运行 flowerbox（或用 -w <项目文件夹> 指定）"
    ),
    "box.sensitive_folder": (
        "不把 {ws} 挂进容器：它就是、包含或位于 {folder}（{what}），代理绝不能看到那里："
        "请在项目文件夹里运行 flowerbox（或用 -w <项目文件夹> 指定）"
    ),
    "box.unmountable": "Docker 无法挂载含有 {chars} 的路径，而 {ws} 含有：请改名",
    "box.linked_worktree": (
        "{ws} 是链接出来的 git 工作树（它的 .git 是个文件），而 flowerbox 在仓库主文件夹的工作树里"
        "隔离工作者：请在主检出里运行，或加 --no-isolate"
    ),
    "box.not_git_top": (
        "{ws} 不是 git 仓库的顶层文件夹，而 flowerbox 在 git 工作树里隔离工作者："
        "在那里运行 `git init && git commit --allow-empty -m start`"
        "（或用 -w <仓库顶层文件夹> 指定），或加 --no-isolate"
    ),
    "box.workspace_env_unread": (
        "没有读取 {path}：flowerbox 从不从工作区取凭据（容器能写它）。"
        "请运行 `flowerbox setup`，或把密钥移到 ~/.config/flower/.env。"
    ),
    "box.no_engine": (
        "连不上 Docker 引擎：请启动它（`systemctl start docker` 或 `dockerd &`），"
        "或让 DOCKER_HOST 指向一个引擎（{problem}）"
    ),
    "box.image_gone": "镜像 {image} 不见了：请运行 `flowerbox build`",
    "box.image_missing": "这里没有镜像 {image}：请运行 `flowerbox build`",
    "box.net_unknown": "--net {net}：请用 {nets} 之一",
    "box.runtime_unknown": "--runtime {runtime}：请用 {runtimes} 之一",
    "run.none_here": (
        '{workspace} 里没有 flowerbox 运行：用 `flowerbox "需求" --detach` 开始一次，'
        "或用 -w <工作区> 或运行编号指定"
    ),
    "run.ambiguous": "{run} 对应 {count} 个运行：请多给几位编号",
    "run.no_such": "这里和索引里都没有运行 {run}：`flowerbox ps --all` 会列出它们",
    "run.ended": (
        "运行 {run} 已经结束（{status}），没有什么可{doing}；"
        "`flowerbox logs {run}` 显示它做了什么，`flowerbox resume {run}` 可继续它"
    ),
    "doing.attach to": "跟随",
    "doing.stop": "停止",
    "doing.answer": "回答",
    "doing.send to": "发送",
    # -- langbox: flowerbox box/, runs/, hostgit, errors, selftest (doctor)
    "untrusted.refused": "{path}：{what}；flowerbox 不跟随也不读取它",
    "untrusted.too_big": "{size} 字节，超过 {limit}",
    "untrusted.grew": "读取时变大了",
    "untrusted.link_or_not_folder": "是链接或不是文件夹",
    "untrusted.symlink": "是符号链接",
    "untrusted.not_regular": "不是普通文件",
    "untrusted.larger_than": "大于 {limit} 字节",
    "hostgit.failed": "git {args} 失败：{said}",
    "gitshadow.not_dir_or_file": (
        "{path} 既不是文件夹也不是文件（是符号链接？），flowerbox 无法给容器一个自己的 git 目录："
        "请把它改成真正的文件夹，或加 --no-isolate 运行"
    ),
    "gitshadow.nothing_to_shadow": "{git_dir} 不是 git 文件夹：没有可影子复制的",
    "gitshadow.objects_in_box": "objects_in_box 必须是规范化的绝对路径：{path}",
    "gitshadow.dest_not_empty": "{dest} 不是空的：请给 make 一个空文件夹",
    "gitshadow.commondir": (
        "{git_dir} 有 commondir（链接工作树的 gitdir 被移到了这里），flowerbox 无法影子复制它："
        "请在主工作树里运行，或加 --no-isolate"
    ),
    "gitshadow.unreadable": "git 读不了 {git_dir}：{said}",
    "gitshadow.bare": (
        "{workspace} 是裸仓库，或它的 gitdir 在别处（{gitdir}），而 flowerbox 需要顶层有 .git "
        "的工作树：请克隆它，或加 --no-isolate 运行"
    ),
    "gitshadow.ref_storage": (
        "{workspace} 以 {storage} 方式存放引用，而 flowerbox 只从 'files' 引用读取分支："
        "请用 `git refs migrate --ref-format=files` 转换，或加 --no-isolate 运行"
    ),
    "gitshadow.run_id": "运行编号 {run_id} 不是普通名字（[A-Za-z0-9._-]）",
    "gitshadow.branch_in_way": "分支 {branch} 挡住了 {base}/*：请改名",
    "gitshadow.brought_back": "分支 {base}/* 已经存在：这个运行编号已被取回过",
    "gitshadow.rmtree": "这个平台的 rmtree 可能跟随符号链接：请手动删除 {path}",
    "gitshadow.no_free_name": "找不到空闲的名字来把 {target} 移到一边",
    "engine.image_absent": "这里没有镜像 {tag}",
    "engine.image_stale": "镜像 {tag} 是为 flowerbox {built_for} 构建的，不是 {version}",
    "engine.unknown_version": "未知版本",
    "engine.no_dockerfile": (
        "{found}，而这个 flowerbox 没有可用来构建的 Dockerfile：请运行 `flowerbox build PATH`，"
        "PATH 为{hint}，或加 --image"
    ),
    "engine.build_failed": "从 {context} 构建 {tag} 失败：{problem}",
    "engine.lost_track": "跟丢了 {name}：{problem}",
    "engine.start_failed": "启动 {name} 失败：{problem}",
    "engine.no_broker": "broker 没有提供 {socket}：`flowerbox broker` 还在运行吗？",
    "engine.gateway_died": "网关在开始监听之前就退出了：\n{logs}",
    "engine.no_lease": (
        "网关已启动，但它的租约套接字 {socket} 没有应答（{problem}）；"
        "镜像是否比这个 flowerbox 旧？`flowerbox build` 会重新构建它"
    ),
    "engine.gateway_silent": "网关没有在 {seconds} 秒内打开 {socket}",
    "engine.no_runtimes": "无法向 Docker 引擎询问它的运行时：{problem}",
    "engine.no_runtime": (
        "Docker 引擎没有运行时 {runtime}（它有 {runtimes}）：请用 "
        "`sudo bash docker/engine.sh --gvisor` 注册 gVisor（docs/image.md），或去掉 --runtime"
    ),
    "engine.none_listed": "未列出任何运行时",
    "engine.image_lookup": "无法查找镜像 {tag}：{problem}",
    "source.clone_hint": (
        "一个 flowerbox 检出（含 Dockerfile 和 pyproject.toml 的文件夹，例如你的 flowerbox "
        "仓库在版本 {version} 的 `git clone`）"
    ),
    "source.installed": (
        "这个 flowerbox 是安装的，不是从检出运行的，所以没有可用来构建的 Dockerfile："
        "请运行 `flowerbox build PATH`，PATH 为{hint}，或在其中运行 `flowerbox build`"
    ),
    "source.not_checkout": "{path} 不是 flowerbox 检出：请传入{hint}",
    "source.other_version": (
        "{path} 是 flowerbox {version}，而这个 flowerbox 是 {own}，用它构建的镜像会运行与本机"
        "预期不同的代码：请安装那个检出（`pip install {path}`），或从 {own} 的检出构建"
    ),
    "prepare.run_dir": (
        "无法创建 {run_dir}（{problem}），flowerbox 把每次运行的会话和记录保存在工作区里："
        "请让 {ws} 可写"
    ),
    "prepare.workbench": (
        "无法在仓库旁边创建工作台 {workbench}（{problem}），隔离的工作者在那里共用它："
        "请让 {parent} 可写，或加 --no-isolate（工作台就放在工作区里）"
    ),
    "prepare.workbench_link": "{workbench} 不是文件夹（是链接？）：请删除它后重试",
    "prepare.flower_env_inside": (
        "FLOWER_ENV 指向 {named}，它在工作区里，容器能写它："
        "请把那个文件移出工作区（例如移到 ~/.config/flower/.env）"
    ),
    "prepare.not_plain": (
        "{path} 是链接，或不是普通文件或文件夹（可能是之前的容器放的），flowerbox 不会挂载它："
        "请删除或替换它，然后重试"
    ),
    "prepare.open_net_filters": (
        "--allow 和 --allow-preset 过滤的是出口代理，而 --net open 不用它："
        "请去掉它们，或去掉 --net open"
    ),
    "prepare.gvisor_open": (
        "--net open 给容器一个自己的网络，而 gVisor 容器没有网络"
        "（docker/gvisor.sh 用 --network=none 注册 runsc）：请去掉 --net open 并用 --allow "
        "放行代理需要的地址，或去掉 --runtime runsc"
    ),
    "prepare.egress_host_shape": (
        "{var}：{item} 不是 名字=地址 的形式（例如 mirror.internal=10.1.2.3）（{problem}）"
    ),
    "prepare.egress_host_address": "{var}：{item} 映射的是地址，不是名字",
    "spec.config_unreadable": "无法读取 {path}（{problem}）：请修好它或删除它",
    "spec.protect_list": '{path}：`protect` 必须是路径列表，例如 protect = ["deploy/"]',
    "spec.protect_entry": (
        "{path}：protect 条目 {entry} 必须是相对工作区、位于工作区内的路径（不以 / 开头，不含 ..）"
    ),
    "state.unusable": (
        "无法用 {path} 保存 flowerbox 的记录（{problem}）：请把 XDG_STATE_HOME 设为你自己的文件夹"
    ),
    "state.socket_root_relative": "{var}={named} 不是绝对路径：请给一个绝对路径，或取消设置它",
    "state.socket_root_unmade": (
        "无法为你的运行的套接字创建 {root}（{problem}）：请创建它的上级文件夹，或取消设置 {var}"
    ),
    "state.socket_root_foreign": (
        "{root} 存放你的运行的套接字，但它不是你的文件夹（是链接，或别的用户创建的）："
        "请删除它后再运行"
    ),
    "state.bad_run_id": "{run_id} 不是 flowerbox 运行编号（形如 20261201-172400-a1b2c3）",
    "terminal.no_docker_cli": (
        "交互式的 `flowerbox shell` 需要 PATH 上有 docker 命令行："
        "请安装它（docker-ce-cli 或 docker.io 软件包），或传入一个不需要终端的命令："
        "flowerbox shell -- COMMAND < /dev/null"
    ),
    "hostgit.config_timeout": (
        "读取 {workspace} 里仓库的 git 配置超过了 {seconds} 秒，所以 flowerbox 不在那里运行 git："
        "它包含的某个文件可能是运行留下的 FIFO 或设备，而不是文件（`git config "
        "--show-origin --get-regexp 'include'` 列出它们；逐个 `ls -l`）"
    ),
    "hostgit.refused_key": (
        "{path} 设置了 {key}，git 从你的仓库配置读取它，而它位于（或被包含自）运行可能改写的"
        "工作树，所以 flowerbox 不在那里运行 git：请把这个设置移出工作树"
        "（`git config --show-origin --get-regexp '^{section}\\.'` 显示它从哪里被包含）"
    ),
    "hostgit.no_git": (
        "在 git 工作树之外的 PATH 上找不到 git（flowerbox 从不运行工作树里的程序，"
        "也不用 PATH 里的相对路径）：请安装 git"
    ),
    "hostgit.could_not_run": "git {command} 无法运行：{problem}",
    "hostgit.overran": (
        "git {command} {why}，已被停止，仓库可能很大或已损坏（或运行故意留下了这样的东西）："
        "请手动运行这条命令查看"
    ),
    "hostgit.why_output": "输出超过了 {mib} MiB",
    "hostgit.why_time": "运行超过了 {seconds} 秒",
    "hostgit.hooks": "无法为 git 的钩子路径创建 {folder}：{problem}",
    "hostgit.form": "flowerbox 不在主机上以那种形式运行 `git {command}`",
    "hostgit.filter_eq": (
        "你的仓库配置里有个过滤驱动的名字含 `=`，任何 `-c` 设置都够不到它："
        "请改名（`git config --get-regexp '^filter\\.'`）"
    ),
    "runs.nothing_to_bring_back": (
        "运行 {run} 没有剩下可取回的：它的提交在结束时已经取回了（或它没有自己的 git 目录）"
    ),
    "runs.bring_back_failed": (
        "再次取回运行 {run} 的提交失败：{problem}（它的 git 目录仍然保留着）"
    ),
    "runs.broker_running": (
        "{folder} 上已经有一个 broker 在运行：每台主机只需一个 `flowerbox broker`"
    ),
    "runs.ledger_folder": "无法创建账本文件夹 {folder}：{problem}",
    "runs.run_dir_outside": "运行 {run} 的运行目录在它的工作区之外",
    "runs.undeliverable": "无法投递给运行 {run}：{problem}",
    "runs.no_supervisor": "无法启动运行的监督进程（{problem}）：见 {log}",
    "runs.budget_spent": (
        "运行 {run} 已经花完了预算 ${budget}："
        "`flowerbox resume {run} --budget USD` 以更多预算继续它"
    ),
    "runs.requests_unreadable": "无法读取运行 {run} 的请求日志：{problem}",
    "runs.still_running": (
        "运行 {run} 仍在 {workspace} 里运行：`flowerbox attach {run}` 跟随它，"
        "`flowerbox stop {run}` 停止它"
    ),
    "runs.unkept": (
        "{workspace} 里的运行 {run} 失去了维持它的进程（它的容器可能还在运行）："
        "`flowerbox stop {run}` 清理它"
    ),
    "runs.record_unreadable": "运行记录里没有 flowerbox 能读的 {kind}：{problem}",
    "selftest.weaken_unknown": "--weaken {value}：请用 {variants} 之一，或 {joined}:CONTAINER",
    "doctor.ok": "正常",
    "doctor.fail": "失败",
    "doctor.fix": "修复：{fix}",
    "doctor.name.engine": "引擎",
    "doctor.name.gvisor": "gvisor",
    "doctor.name.image": "镜像",
    "doctor.name.credentials": "凭据",
    "doctor.name.workspace": "工作区",
    "doctor.name.user": "用户",
    "doctor.name.state": "状态",
    "doctor.name.gateway": "网关",
    "doctor.name.proxy": "出口代理",
    "doctor.default_socket": "默认套接字",
    "doctor.no_engine": "{where} 没有 Docker 引擎应答",
    "doctor.no_engine_fix": (
        "请启动它（`systemctl start docker`，或在检出里 `bash docker/engine.sh`），"
        "或让 DOCKER_HOST 指向一个引擎；你必须有权使用它（docker 组）"
    ),
    "doctor.engine_ok": "{where} 有 Docker 引擎应答",
    "doctor.no_look": "没有引擎，无法查看",
    "doctor.see_engine": "见 引擎 一项",
    "doctor.runtimes_unsaid": "引擎没有说出它的运行时：{problem}",
    "doctor.no_runsc": (
        "引擎没有 runsc（可选：--runtime runsc 在代理和主机内核之间放入 gVisor 的内核）"
    ),
    "doctor.no_runsc_fix": "`sudo bash docker/engine.sh --gvisor` 会注册它（docs/image.md）",
    "doctor.runsc": "引擎提供 runsc（{path}），平台 {platform}",
    "doctor.its_default": "它的默认平台",
    "doctor.image_no_look": "{image}：没有引擎，无法查看",
    "doctor.image_absent": "这里没有 {image}",
    "doctor.image_fix": (
        "运行 `flowerbox build`（或用 --image / FLOWERBOX_IMAGE 指定一个你有的镜像）"
    ),
    "doctor.dotenv_unreadable": "读不了一个 .env 文件：{problem}",
    "doctor.dotenv_fix": "修好它或删除它",
    "doctor.no_credentials": "没有找到 ANTHROPIC_API_KEY 或 ANTHROPIC_AUTH_TOKEN",
    "doctor.no_credentials_fix": (
        "运行 `flowerbox setup`（把你的密钥存到全局 .env，权限 0600），或 export "
        "ANTHROPIC_API_KEY（flowerbox 从不读取工作区的 .env）"
    ),
    "doctor.credential_from": "{key} 来自 {origin}",
    "doctor.process_environment": "进程环境",
    "doctor.workspace_ok": "{ws}（git；{count} 个受保护路径）",
    "doctor.root": (
        "你是 root，所以容器以 uid 0 运行（其他限制都还在）：请以你自己的、在 docker 组里的"
        "用户运行 flowerbox 来避免"
    ),
    "doctor.uid": "uid {uid}：容器以你的身份运行",
    "doctor.swept": "删除了被杀掉的运行留下的 {count} 个凭据文件",
    "doctor.none_left": "磁盘上没有留下凭据",
    "doctor.needs_above": "需要引擎、镜像、凭据和工作区（见上）",
    "doctor.fix_above": "先修好上面的问题",
    "doctor.box_failed": "容器没有启动：{problem}",
    "doctor.see_message": "见上面的消息",
    "doctor.gateway_fix": "检查你的网络和 ANTHROPIC_BASE_URL；`flowerbox shell` 可查看容器",
    "doctor.proxy_fix": (
        "重新构建镜像（`flowerbox build`），让网关提供出口代理；用 --net open 时本就没有代理"
    ),
    "doctor.summary_misses": "{count} 项检查：{misses} 项要修复",
    "doctor.summary_ok": "{count} 项检查：全部正常",
    "prepare.what_config": "你的配置",
    "prepare.what_credentials": "flower 的凭据文件",
    "prepare.what_records": "flowerbox 自己的记录",
    "doctor.gateway_ok": "网关已启动，它的上游可以连通",
    "doctor.gateway_health": "健康检查：{why}",
    # -- lead: what flowerbox says as a box starts (warnings, how to answer, a detached run)
    "launch.root_warning": (
        "flowerbox 以 root 身份运行，所以盒子以 uid 0 运行（其余各项限制仍然有效）。"
        "请以你自己的用户（docker 组成员）运行 flowerbox 来避免这一点。"
    ),
    "launch.typed_answers": (
        "在这里输入的一行回答运行中最早的未答问题（没有未答问题时，发给运行）；"
        "`flowerbox answer` 可以在另一个终端做同样的事。"
    ),
    "launch.net_open": (
        "--net open：代理的容器有自己的网络；它的流量既不过滤也不记录（API 仍然经过网关）。"
    ),
    "launch.nobody_answers": (
        "stdin 不是终端，所以不等待代理的问题（--timeout 0）；"
        "要在另一个终端用 `flowerbox answer` 回答，请传 --timeout SECONDS"
    ),
    "launch.detached": "{run_id} 在后台运行：flowerbox ps | logs -f | attach | stop",
    "launch.and": "、",
    "launch.excluded": "已把 {shown} 加进 {path}（在这个克隆里 git 会忽略它们；删掉即可撤销）",
    # -- langnet: the broker, the gateway and proxy, the cluster (flowerbox.broker,
    # flowerbox.sidecar, flowerbox.kube): refusals answered to the box, logged, or printed
    "broker.no_answer": (
        "{path} 上的 broker 没有应答（{problem}）：用 `flowerbox broker` 启动它，"
        "或停掉它以便每个运行使用自己的网关"
    ),
    "broker.not_object": "{path} 上的 broker 的应答不是一个 JSON 对象",
    "broker.refused": "broker 拒绝了 {op}：{error}",
    "broker.notes_no_scratch": "无法为注记建立临时仓库：{problem}",
    "broker.notes_push_failed": "把 {ref} 推送到 {url} 失败了 {tries} 次：{refused}",
    "broker.git_failed": "git {command} 失败：{problem}",
    "broker.git_no_host": (
        "{source} 有 GIT_TOKEN 但没有可用的 GIT_HOST；请加上该令牌所属远端的主机名，"
        "例如 GIT_HOST=github.com"
    ),
    "broker.git_base_url": "{source}：GIT_BASE_URL 必须是不含凭据的 http(s) URL",
    "broker.body_over": "请求体超过 {limit} 字节",
    "broker.ledger_unopened": "无法打开 broker 的账本 {path}：{problem}；把它移走即可重新开始",
    "broker.ledger_write": "broker 的账本拒绝了一次写入：{problem}",
    "broker.ledger_read": "无法读取 broker 的账本：{problem}",
    "broker.cannot_listen": "无法在 {api}、{proxy} 和 {git} 上监听：{problem}",
    "broker.token_mismatch": "运行 {run} 已以另一个令牌登记：不予服务",
    "broker.token_reused": "它的令牌属于另一个运行：不予服务",
    "broker.metrics_unserved": (
        "无法在 --metrics {address} 上提供指标：{problem}；请给一个空闲的 HOST:PORT"
    ),
    "broker.bad_address": "{flag} {address}：请给出 HOST:PORT，例如 0.0.0.0:8080",
    "broker.no_cluster": (
        "--listen 从集群获知运行，但连不上任何集群（{problem}）："
        "在 broker 自己的 Pod 中运行它（flowerbox kube render --broker-manifests），"
        "或设置 KUBECONFIG"
    ),
    "broker.not_run_id": "不是运行编号：{value}",
    "broker.bad_budget": "运行的预算必须是正的美元数：{budget}",
    "broker.control_unbound": (
        "无法绑定 broker 的控制套接字 {path}：{problem}；"
        "unix 套接字的路径必须少于 108 字节：把 XDG_STATE_HOME 设为更短的文件夹"
    ),
    "broker.paths_relative": "socket_dir 和 gateway_dir 必须是绝对路径",
    "broker.registered_already": "运行 {run} 已经登记过了",
    "broker.cannot_serve": "无法在 {path} 中为运行 {run} 提供服务：{problem}",
    "broker.unknown_op": "未知操作 {op}：可用 register、revoke 或 status",
    "broker.pkt_length": "pkt-line 的长度不是四个十六进制数字：{length}",
    "broker.pkt_size": "pkt-line 的长度为 {size}；git 的长度是 5 到 {most}（或 0）",
    "broker.pkt_lines": "数据包之前超过 {most} 行",
    "broker.pkt_ascii": "命令列表中有一行不是 ASCII",
    "broker.pkt_head": "数据包之前超过 {most} 字节",
    "broker.pkt_ended": "推送在命令列表中途结束",
    "broker.pkt_capabilities": "第一条命令之后又出现了能力声明",
    "broker.pkt_not_command": "不是引用更新（old new ref）：{line}",
    "broker.pkt_oid_lengths": "新旧对象编号长度不同",
    "gateway.head_too_large": "请求头太大",
    "gateway.closed_in_head": "连接在请求头中途关闭",
    "gateway.not_request": "不是请求头",
    "gateway.both_lengths": "同时有 Transfer-Encoding 和 Content-Length",
    "gateway.body_ended": "请求体提前结束",
    "gateway.unexpected_event": "请求体中出现意外的 {event}",
    "gateway.body_too_large": "请求体超过 {limit} 字节",
    "gateway.too_slow": "请求到达得太慢",
    "gateway.bare_line_end": "请求头中有单独的 CR 或 LF；每行应以 CRLF 结尾",
    "gateway.empty_line": "请求行之前有空行",
    "gateway.obs_fold": "有 obs-fold（以空格或制表符开头的头部行）",
    "gateway.credentials_unread": "无法读取凭据文件 {path}：{problem}",
    "gateway.no_key": (
        "{source} 中既没有 ANTHROPIC_API_KEY 也没有 ANTHROPIC_AUTH_TOKEN；"
        "在主机上运行 `flower setup`，或把其中一个写进该文件"
    ),
    "gateway.base_url": "{source}：ANTHROPIC_BASE_URL 必须是 http(s) URL",
    "gateway.egress_log_needed": "--proxy-socket 需要 --egress-log：每个决定都要记录",
    "gateway.log_unopened": "无法打开{name} {path}：{problem}",
    "gateway.requests_log": "请求日志",
    "gateway.egress_log": "出网日志",
    "egress.unknown_preset": "未知的 --allow-preset {preset}：请用 {known} 之一",
    "egress.allow_all": "--allow '*' 会放行一切：要这样请用 --net open",
    "egress.bad_entry": (
        "--allow {entry}：请给出裸主机名如 github.com、`*.github.com` "
        "或一个 IP 地址（不带协议、端口、路径或范围）"
    ),
    "egress.entry_problem": "--allow {entry}：{problem}",
    "egress.wildcard_address": "--allow {entry}：`*.` 只接域名，不接地址",
    "prices.unreadable": "{path}：无法读取价格文件（{problem}）",
    "prices.not_object": "{path}：应为 模型编号 -> 价格 的 JSON 对象",
    "prices.bad_figure": (
        "{path}：{model} 的 {name} 必须是 >= 0 的数（每百万 token 的美元数），实为 {value}"
    ),
    "prices.not_prices": "{path}：{model} 必须是价格对象，实为 {entry}",
    "prices.long_prompt": "{path}：{model} 的 long_prompt 需要 above_prompt_tokens > 0",
    "kube.no_kubeconfig": "没有可用的 kubeconfig（{problem}）：设置 KUBECONFIG 或用 --context NAME",
    "kube.refused_to": (
        "集群拒绝在命名空间 {namespace} 中{what}："
        "{status} {reason}；用 `kubectl auth can-i` 检查你的 context 的权限"
    ),
    "kube.do_read_volume": "读取运行 {run} 的卷",
    "kube.do_read": "读取 {name}",
    "kube.do_delete": "删除 {name}",
    "kube.do_list_jobs": "列出 Job",
    "kube.do_list_pods": "列出 Pod",
    "kube.do_read_logs": "读取日志",
    "kube.refused_object": (
        "集群拒绝了 {kind}/{name}：{status} {reason}；"
        "`flowerbox kube render` 会打印它，可交给 `kubectl apply --dry-run=server -f -`"
    ),
    "kube.no_command": "运行 {run} 的卷没有记录命令：请开始一个新运行",
    "kube.still_running": "运行 {run} 仍在运行：先执行 `flowerbox stop {run} --on kube`",
    "kube.not_running": "运行 {run} 没有在运行：先执行 `flowerbox resume {run} --on kube`",
    "kube.no_pod": (
        "运行 {run} 在命名空间 {namespace} 中没有 Pod：`flowerbox ps --on kube` 会列出各个运行"
    ),
    "kube.no_container_pod": "运行 {run} 还没有 {container} Pod：请稍后再试",
    "kube.no_job": "命名空间 {namespace} 中没有运行 {run} 的 Job",
    "kube.wait_timeout": (
        "运行 {run} 在 {seconds:.0f} 秒内没有结束："
        "`flowerbox logs {run} --on kube` 显示它进行到哪里"
    ),
    "kube.remove_refused": "集群拒绝删除 {what}：{status} {reason}",
    "kube.bad_name": (
        "{what} {value} 不是 Kubernetes 名称：请用小写字母、数字和 '-'"
        "（至多 63 个），以字母或数字开头和结尾"
    ),
    "kube.repo_scheme": (
        "--repo {repo}：请给出 https:// 的 git URL（broker 拉取它并持有其凭据；其他协议都不经过它）"
    ),
    "kube.bad_run_id": (
        "运行编号 {run} 不能用来命名 Kubernetes 对象：请用小写字母、数字和 '-'（至多 40 个）"
    ),
    "relay.header_fields": "头部字段超过 {most} 个",
    "relay.other_repo": "运行 {run} 只能访问它自己的仓库 {repo}",
    "relay.no_credential": "broker 没有 {host} 的 git 凭据",
    "relay.no_bearer": "请只发送一个 Authorization: Bearer <运行的令牌>",
    "relay.dead_token": "这个令牌不属于任何仍在进行的运行",
    "relay.encoded": "推送的请求体要原样发送，不能编码",
    "relay.unreachable": "连不上 git 远端 {host}：{problem}",
    "relay.broke_off": "应答中途断开：{error}",
    "relay.push_options": "推送选项被拒绝（代码托管平台可能据此行事）",
    "relay.capability": "推送能力 {capability} 被拒绝（代码托管平台可能据此行事）",
    "relay.remote_refused_credential": (
        "git 远端拒绝了 broker 用于 {repo} 的 git 凭据（HTTP {status}）；"
        "请检查 broker 凭据文件中的 GIT_TOKEN"
    ),
    "relay.not_found": "{repo}：git 远端上没有找到",
    "relay.redirected": "git 远端要求重定向（HTTP {status}）；中继不跟随任何重定向",
    "relay.remote_status": "git 远端应答了 HTTP {status}",
    "relay.method": "{method} 不是 git 智能 HTTP 请求；只接受 GET 和 POST",
    "relay.not_smart": "只中继 git 的智能 HTTP（info/refs?service=...）",
    "relay.not_service": "只中继 POST .../git-upload-pack 或 .../git-receive-pack",
    "relay.not_repo": "不是中继服务的仓库路径：应为 https URL 的 /HOST/PATH",
    "relay.many_refs": "一次推送了 {count} 个引用（{names}）；运行只能推送 {own}",
    "relay.not_own": "{ref} 不是这个运行的引用；运行只能推送 {own}",
    "relay.deletes": "拒绝删除 {own}",
    "relay.no_report": "拒绝不要求 report-status 的推送（否则无法记下它）",
    "broker.why_no_job": "运行 {run} 没有正在运行的 Job；在有 Job 运行之前，它的令牌被拒绝",
    "broker.why_unknown_token": "不是这个 broker 所服务的运行的令牌",
    "broker.why_not_listed": "broker 列出集群的 Secret 之后，运行 {run} 会重新得到服务",
    "broker.lease_held": "运行 {run} 的租约已经有人持有",
    "broker.why_ended": "运行 {run} 已经结束；它的令牌已被吊销",
    "broker.why_two_credentials": "{problem}；运行的令牌只发送一次",
    "broker.why_no_token": "没有令牌；请把运行的令牌作为 x-api-key 发送",
    "broker.why_proxy_two": "{problem}；请把运行的令牌放进代理 URL",
    "broker.why_proxy_no_token": (
        "没有令牌：请把运行的令牌放进代理 URL，http://run:TOKEN@host:port"
    ),
    "broker.not_its_token": "这个请求没有携带运行 {run} 的令牌；每个 box 只使用发给它的令牌",
    "gateway.body_unreadable": (
        "请求体不是网关能读的单个 JSON 对象（{why}）；网关必须读懂请求体，才知道它让 API 去获取什么"
    ),
    "gateway.body_not_utf8": "它不是 UTF-8",
    "gateway.body_too_deep": "它嵌套得太深",
    "gateway.body_not_object": "它不是 JSON 对象",
    "gateway.body_surrogate": "某个字符串含有孤立的代理项转义",
    "gateway.not_endpoint": (
        "{method} {target} 不是 Claude Code CLI 使用的 API 端点；"
        "网关只转发 {allowed}（docs/gateway.md）"
    ),
    "gateway.endpoints_and": " 和 ",
    "gateway.keeper_gone": (
        "主机上守护这个运行的进程已经不在了，它的容器正在被停止：不再转发任何请求"
    ),
    "gateway.lease_unbound": "无法在租约套接字 {path} 上监听：{problem}",
    "gateway.unreachable": "连不上 {upstream}：{reason}",
    "gateway.internal_error": (
        "处理这个请求时出现内部错误（这是 flowerbox 的缺陷：回溯信息在网关日志中，"
        "见 `flowerbox logs RUN`；请报告它）"
    ),
    # -- lead: the gateway's budget refusals (a run's budget, or the broker's team budget)
    "meter.run_budget": "运行的预算",
    "meter.run_remedy": "用 --budget 调高它",
    "meter.team_budget": "团队的预算",
    "meter.team_remedy": "用 `flowerbox broker --team-budget` 调高它",
    "meter.spent": "flowerbox gateway：{whose} {budget} 已用完（已用 {total}）；{remedy}",
    "meter.no_room": (
        "flowerbox gateway：这个请求最多可能花 {amount}，而{whose} {budget} 只剩 {left}"
        "（已用 {total}）；{remedy}"
    ),
    "meter.busy": (
        "flowerbox gateway：这个请求最多可能花 {amount}；{whose} {budget} 还剩 {left}，"
        "其中 {reserved} 仍被进行中的请求预留；{remedy}"
    ),
    # -- langflower: flower/, flowerbox/cli/ (refusals, delivery lines) ----------------
    "cli.analyze_no_run_dir": "{path} 没有运行目录：请给出一次 flower 运行的 run_dir",
    "cli.analyze_nothing_ran": ("{path} 里既没有 {sessions} 也没有 {manifest}：什么都没运行过"),
    "cli.png_no_chromium": (
        "--png 需要无界面的 Chromium：请安装它（Debian/Ubuntu：apt-get install "
        "chromium），或把 FLOWER_CHROMIUM 设为它的路径，或改用 --svg"
    ),
    "cli.png_did_not_run": "--png：{browser} 没能运行（{problem}）；请改用 --svg",
    "cli.png_drew_nothing": "--png：{browser} 什么也没画出来（{tail}）；请改用 --svg",
    "cli.events_unwritable": "--events {path}：无法写入那里（{problem}）",
    "cli.passthrough_refused": "flower {command} 会拒绝这个：{problem}",
    "cli.passthrough_fixed": "{options}：由运行 flower {command} 的程序设定；请去掉它",
    "cli.report_no_steps": (
        '{manifest} 里没有记录任何步骤：请先运行 `flower "ask"`，或给出一次这样的运行的目录'
    ),
    "cli.cannot_write": "无法写入 {path}（{problem}）：请给出另一个路径",
    "cli.no_run_matches": (
        "{run_dir} 里没有运行匹配 {given}（那里的运行：{listed}）：请给出其中一个"
        "编号，或它独一无二的开头"
    ),
    "cli.several_runs_match": (
        "{run_dir} 里有多个运行匹配 {given}（那里的运行：{listed}）：请给出其中一"
        "个编号，或它独一无二的开头"
    ),
    "cli.none": "无",
    "setup.env_unset": (
        "--key-from-env {name}：这个环境变量未设置或为空；请先把密钥 export 到它里面"
    ),
    "setup.no_stdin": (
        "标准输入（不是终端）里没有 {name}：请用管道传入（printf '%s' \"$KEY\" | "
        "flower setup），或用 --key-from-env VAR"
    ),
    "setup.none_given": "没有给出 {name}：请再运行一次 `flower setup` 并粘贴它",
    "setup.bad_chars": (
        "给出的 {name} 含有空格或密钥里不会有的字符：请只粘贴密钥本身（不带引号、"
        "不带 `Bearer `、不带其他文字）"
    ),
    "setup.too_short": ("给出的 {name} 只有 {length} 个字符，作为密钥太短：请粘贴完整的密钥"),
    "setup.not_sk_ant": (
        "给出的 {name}（{masked}）不以 {prefix} 开头，而 Anthropic API 的密钥都以"
        "它开头：请粘贴 console.anthropic.com 上的密钥，或对 bearer token 用 "
        "--token，或对自有密钥的网关用 --base-url"
    ),
    "setup.bad_url": "--base-url {url} 必须以 http:// 或 https:// 开头",
    "setup.multiline": "{key}：值不能跨行",
    "state.lineage_corrupt": (
        "{path} 不是这个 flower 的 lineage 文件（应为 "
        '{{"workspaces": {{path: {{"steps": {{...}}}}}}}}）；它没有被改动：把它移'
        "开即可重新开始"
    ),
    "state.progress_corrupt": (
        "{path} 不是这个 flower 的进度文件（应为 "
        '{{"workspaces": {{path: {{"runs": [...], "steps": {{...}}}}}}}}）；它没有'
        "被改动：把它移开即可从头开始各轮"
    ),
    "state.manifest_not_list": (
        "{path} 里是一个 JSON {kind}，不是行的列表；它没有被改动：把它移开后重新运行"
    ),
    "state.manifest_row": ("{path} 里有一行不是 JSON 对象；它没有被改动：把它移开后重新运行"),
    "state.asks_corrupt": (
        "{path} 不是问题的列表；它没有被改动：把它移开（运行会重新问它仍需要的）"
    ),
    "state.not_json": (
        "{path} 不是有效的 JSON（{problem}）；它没有被改动：修好它或把它移开，然后重试"
    ),
    "state.lock_reentrant": "{lock} 已被这个线程持有（不可重入）",
    "json.too_large": "大于 {limit} 字节：未读取",
    "json.too_deep": "嵌套超过 {depth} 层（或括号不配对）：未读取",
    "json.not_json": "不是 JSON（{problem}）",
    "otlp.no_sdk": (
        "{name} 已设置，所以 flower 会导出追踪数据，但没有安装 OpenTelemetry SDK："
        "请运行 `{install}`（或取消设置 {name}）"
    ),
    "otlp.protocol": (
        "flower 的导出器不支持 OTLP 协议 {protocol}：请把 "
        "OTEL_EXPORTER_OTLP_PROTOCOL 设为 http/protobuf（默认）或 grpc"
    ),
    "otlp.no_exporter": (
        "通过 {protocol} 发送追踪数据需要 {module}：请运行 `{package}`，或设置 "
        "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"
    ),
    "workbench.not_dir": "工作台文件夹 {path} 已存在但不是目录；请把那个文件移走",
    "workbench.cannot_create": (
        "无法创建工作台文件夹 {path}（{problem}）：请让 {parent} 可写，或在你能写入的文件夹里工作"
    ),
    "store.message": "{path}：{problem}。{fix}",
    "store.network_fs": (
        "位于 {fstype} 文件系统上（挂载在 {point}）；SQLite 的锁和 WAL 共享内存在"
        "那里不起作用，数据库会损坏"
    ),
    "store.fix_local_disk": "请把运行目录放在本地磁盘上：给出另一个 run_dir。",
    "store.fix_move_aside": "请把它移开，或给出另一个 run_dir。",
    "store.not_sqlite": "不是 SQLite 数据库（{problem}）",
    "store.quick_check": "没有通过 PRAGMA quick_check（{verdict}）",
    "store.fix_restore": "请从备份恢复它，或把它移开，或给出另一个 run_dir。",
    "store.foreign": "是另一个程序的 SQLite 数据库（表：{tables}）",
    "store.lookalike": "有和我们同名但列不同的表（{tables}）",
    "store.newer": "是较新版本的 flower 写的（未知的迁移：{migrations}）",
    "store.fix_upgrade": "请升级 flowerbox，或给出另一个 run_dir。",
    "store.no_wal": "无法切换到 WAL 模式（journal_mode 仍是 {mode}）",
    "store.cannot_open": "无法打开（{problem}）",
    "store.fix_permissions": "请检查它的权限，或给出另一个 run_dir。",
    "store.locked": ("被另一个写入者锁住，等了 {attempts} 次、每次 {wait_ms} 毫秒仍未释放"),
    "store.fix_stop_writer": "请停止正在写它的另一个进程，或给出另一个 run_dir。",
    "script.exhausted": "序列已用完：{count} 个回复都已给出",
    "script.rule_failed": "规则 {rule}：{problem}",
    "script.no_match": (
        "没有规则匹配请求 #{index}（kind={kind}，agent_id={agent_id}，tool_results={results}）"
    ),
    "script.none_set": "FakeAPI 上没有设置脚本",
    "script.unreadable": "{path}：无法读取脚本文件：{problem}",
    "script.no_rules": "{path}：'rules:' 下应为非空列表",
    "script.bad_json": "{where}：无效的 JSON：{problem}",
    "script.unknown_format": "{path}：未知的脚本格式；请用 .json、.yaml 或 .yml",
    "script.no_yaml": ("{path}：YAML 脚本需要 PyYAML：pip install 'flowerbox[yaml]'，或改用 JSON"),
    "script.bad_yaml": "{where}：无效的 YAML：{problem}",
    "boxcli.git_failed": "git {command} 在 {workspace} 里失败：{problem}",
    "boxcli.outside_workspace": (
        "{path} 在工作区 {workspace} 之外，而只有工作区会挂载进盒子：请把文件移进"
        "工作区，或用 -w <包含它的文件夹>"
    ),
    "boxcli.weaken_and_control": "--weaken 和 --negative-control：只能给其中一个",
    "boxcli.kube_needs_run": ("用 --on kube 时请给出运行编号：`flowerbox ps --on kube` 会列出它们"),
    "boxcli.kube_needs_repo": ("--on kube 需要 --repo URL：运行所用的 https git 远程仓库"),
    "boxcli.kube_no_answer": (
        "运行 {run} 没有在等 {question} 的回答（待回答：{pending}）：`flowerbox "
        "ps --on kube` 会列出问题"
    ),
    "boxcli.kube_only_flag": "{flag} 是给集群用的：请加上 --on kube，或去掉它",
    "boxcli.local_only_flag": ("{flag} 是给本机用的，不是给集群：用 --on kube 时请去掉它"),
    "boxcli.kube_runtime": "--runtime {runtime}：请用 runc 或 runsc",
    "boxcli.requests_flags": (
        "--requests 显示请求日志的当前样子：不能与 -f 同用；--json 要和 --requests 一起用"
    ),
    "boxcli.no_steps": "运行 {run} 还没有记录任何步骤：没有可画的",
    "boxcli.still_running": (
        "运行 {run} 仍在运行：`flowerbox attach {run}` 可跟随它，`flowerbox stop {run}` 可停止它"
    ),
    "boxcli.shell_not_resumed": "shell 不会被继续：请再运行一次 `flowerbox shell`",
    "boxcli.no_answer": (
        "运行 {run} 没有在等 {question} 的回答（待回答：{pending}）：`flowerbox "
        "ps` 会列出问题和它们的编号"
    ),
    "boxcli.answer_refused": (
        "运行 {run} 拒绝了这个回答：{question} 在此期间已关闭（已回答或已超时）"
    ),
    "boxcli.cluster_only": ("flowerbox {command} 是给集群上的运行用的（--on kube）：{what}"),
    "boxcli.rm_here": "这里的运行就是它的记录和你工作区的 runs/，由你保留",
    "boxcli.running_no_deliver": "运行 {run} 仍在运行：它的提交会在结束时带回来",
    "delivery.nothing": "工作者没有改动任何文件：没有可交付的",
    "delivery.more": " 等，另有 {count} 个",
    "delivery.merged": "已从分支 {branch} 合并进你的检出",
    "delivery.patch": "在分支 {branch} 上，也在补丁 {patch} 里",
    "delivery.branch": "在分支 {branch} 上",
    "delivery.work": (
        "工作成果{where}：基于 {base} 的 {commits} 个提交，{files} 个文件：{shown}{more}"
    ),
    "delivery.apply": "  应用它：{command}",
    "delivery.not_merged_goal": "未合并：运行没有达成目标；请先看看这个分支",
    "delivery.not_merged_git": "未合并：git 说：{said}",
    "delivery.failed": "运行的工作成果无法交付：{problem}",
    "delivered.taken": "已送达",
    "delivered.rejected": "被运行拒绝",
    "delivered.waiting": "在运行的收件箱里；它还没有取走",
    "runbusy.who": "{host} 上的 pid {pid}",
    "runbusy.fix": (
        '`flower status` 可查看它，`flower answer ID "text"` 回答它的问题，'
        '`flower send "text"` 告诉它一些事；开始另一次之前请先停止它（在它的终端按'
        " Ctrl+C，盒子用 `flowerbox stop`），或用 --run-dir 让新运行用自己的目录"
    ),
    "runbusy.message": (
        "{run_dir} 里正在进行另一次 flower 运行（{who}，自 {since} 起：{doing}）。"
        "一个运行目录同一时间只给一次运行用：{fix}"
    ),
    "lock.who_process": "进程 {pid}",
    "lock.who_another": "另一个进程",
    "lock.timeout": (
        "{path} 过了 {timeout} 秒仍被{who}锁住；如果那个进程卡住了，请停止它（它退"
        "出时锁会释放）然后重试"
    ),
    "git.failed": "git {command} 失败：{said}",
    "step.failed": "步骤 {step} 失败：{why}",
    "step.gate_failed": "它的检查没有通过",
    "status.db_busy": "{db} 正忙（{problem}）：有运行在写它；请稍后重试",
    "status.db_unreadable": (
        "{db} 无法作为会话数据库读取（{problem}）：它已损坏或不是 flower 的；请把"
        "它移开（下次运行会新建一个）"
    ),
    "status.rows_ignored": "{path} 不是行的列表；已忽略",
    # -- lead: what the command lines say beside their results (saved, created, stopping)
    "say.demo_workspace": "演示工作区：{workspace}  （模型是脚本化的；不用任何密钥）",
    "say.look_around": "到处看看：{root}（runs/ 里是会话，workspace/.flower 里是笔记）",
    "say.step_failed": "步骤失败：",
    "say.wrote": "已写入 {path}",
    "say.wrote_private": "已写入 {path}（权限 0600）",
    "say.removed": "已删除 {what}",
    "say.note": "注意：",
    "say.env_overrides": (
        "你的环境里也设置了 {key}，它优先于这个文件：取消设置它，这里写的值才会生效"
    ),
    "say.probe_failed": "探测失败：",
    "say.box_demo_workspace": "演示工作区：{workspace}（模型是脚本化的；不用真实密钥）",
    "say.image_ready": "{image} 已就绪（由 {context} 构建）",
    "say.control_named": "负面对照 {name}：{breaks}；预期 FAIL：{fails}，其余探针都 PASS",
    "say.control_weak": (
        "负面对照：一个故意削弱的容器（root、默认能力、无 seccomp、主机网络、Dock"
        "er 套接字）：这里每个探针都应 FAIL，主机边界检查中只有 git_hook_red"
        "irect 应 FAIL（其余检查评判的是主机自己的代码，盒子改变不了）"
    ),
    "say.planted_left": "无法删除自检放置的东西：{what}",
    "say.probes_silent": (
        "有些探针从未报告：镜像比这个 flowerbox 旧？请运行 `flowerbox bu"
        "ild`。盒子的 stderr 结尾是：\n{tail}"
    ),
    "say.host_section": "{section}：flowerbox 的主机代码对抗盒子放置的东西",
    "say.probes": "{count} 个探针",
    "say.host_checks": "，{count} 项主机边界检查",
    "say.counted": "{counted}：{passed} PASS，{failed} FAIL",
    "say.created": "已创建 {what}",
    "say.kube_waiting": "正在等待 {run}（最多 {seconds} 秒）",
    "say.kube_by_tag": (
        "{image} 是按标签指定的：请传 --image NAME@sha256:...（或"
        "先在这里 pull 或 push 它），这样运行的就是审查过的"
    ),
    "say.stopped": "已停止 {what}",
    "say.kube_review": (
        "它结束后（`flowerbox ps --on kube`），审查工作：git fetc"
        "h origin {ref}:refs/remotes/flowerbox/{run} "
        "&& git log -p ..flowerbox/{run}"
    ),
    "say.kube_answer_anyway": "{run}: 它的问题未知（{waiting}）：照样回答",
    "say.kube_dropped": "已创建 {what}：`flowerbox logs {run} -f --on kube` 会显示运行取走它",
    "say.questions_unknown": "{run}: 它的问题未知：{waiting}",
    "say.no_runs": '{where} 里没有 flowerbox 运行：`flowerbox "ask" --detach` 可以启动一个',
    "say.no_requests": "这个运行（还）没有记录任何请求",
    "say.requests_spent": "{count} 个请求 · ${spent}",
    "say.keeper_lost": "{run} 失去了它的看守进程：正在停止并清理",
    "say.stopping": "正在停止 {run}（flower 会记录它的步骤；最多 30 秒）",
    "say.stopped_unrecorded": "{run}: 代理已停止，它的看守进程还没记录下来",
    "say.stopped_resumable": "{run}: {status}；`flowerbox resume {run}` 可继续它",
    "say.sent_to_stopped": "{run} 已停止：你 `flowerbox resume` 它时它会读到这个",
    "launch.masked_env": (
        "{path} 对盒子隐藏（那里显示为一个空文件）：凭据只到达网关，来自你的环境或 ~/."
        "config/flower/.env"
    ),
    "say.answered": "已回答 {ask}（{path}）",
    "say.sent": "已发送（{path}）",
    "say.answer_with": "回答：{command}",
    # -- lang3: selftest, egress, fetch
    "verdict.identity_uid": "uid {uid}（euid {euid}），应为你的 uid {yours}",
    "verdict.identity_groups": (
        "gid {gid}，附加组 {groups}：应为你的 gid {yours}，且没有其他组（组能打开它拥有的东西，"
        "包括引擎的套接字）"
    ),
    "verdict.identity_root": (
        "uid 0：flowerbox 以 root 运行，所以盒子也是（其余各项限制都成立）；要避免这一点，请以你"
        "自己的用户（在 docker 组里）运行 flowerbox"
    ),
    "verdict.identity_ok": "uid {uid}，gid {gid}，没有其他组：是你的，不是 root",
    "verdict.caps_ok": "CapEff 和 CapBnd 都是 0",
    "verdict.caps": "CapEff {eff}，CapBnd {bnd}",
    "verdict.nnp_ok": "已设置",
    "verdict.nnp": "no_new_privs {flag}：setuid 程序有效",
    "verdict.seccomp_none": "模式 {mode}：没有 seccomp 过滤器",
    "verdict.seccomp_no_table": "没有 {machine} 的系统调用表：不知道过滤器拒绝什么",
    "verdict.seccomp_reached": "已加载过滤器，但这些调用到达了内核：{got}",
    "verdict.seccomp_ok": "模式 2；以 EPERM 拒绝：{tried}",
    "verdict.gvisor_seccomp": "gVisor 的沙箱在主机上以 seccomp 模式 {mode} 运行",
    "verdict.gvisor_seccomp_ok": (
        "gVisor：它的沙箱在主机上以 seccomp 模式 2 运行；盒内为模式 {mode}：配置文件会拒绝的调用"
        "到达的是 gVisor 的内核，而不是主机的（{tried}）"
    ),
    "verdict.root_no_options": "没有选项",
    "verdict.root_mounted": "/ 的挂载方式为 {options}",
    "verdict.root_written": "根文件系统接受了一次写入",
    "verdict.tmp_runs": "写到 /tmp 的脚本能运行",
    "verdict.tmp_noexec": "/tmp 拒绝执行",
    "verdict.tmp_unchecked": "/tmp 不检查 noexec",
    "verdict.nothing": "无",
    "verdict.none": "无",
    "verdict.root_ok": "/ 只读，{tmp}；按设计可写且可执行：{executable}",
    "verdict.engine_answers": "{engines} 上有 Docker 引擎应答",
    "verdict.sockets_unopenable": (
        "盒子看得到却不能打开的套接字（是引擎的？换个组或 uid 就可能打开）：{sockets}"
    ),
    "verdict.walk_cut": "遍历被截断（{why}）",
    "verdict.no_engine": "可达的 unix 套接字中没有引擎（遍历了 {entries} 项；套接字：{others}）",
    "verdict.interfaces": "网络接口：{names}",
    "verdict.tcp_reached": "不经代理就到达了主机的环回地址",
    "verdict.ipv4_route": "内核有一条向外的 IPv4 路由",
    "verdict.tcp_ok": "不经代理无路可出（{error}）",
    "verdict.policy_passed": (
        "越过运行的网络策略到达了集群的 API Service：网络插件是否执行 NetworkPolicy？"
    ),
    "verdict.policy_held": "网络策略守住了（{error}）",
    "verdict.udp_reached": "一个数据报到达了主机的环回地址",
    "verdict.udp_route": "内核会把数据报路由出去（有 IPv4 路由）",
    "verdict.udp_ok": "没有数据报离开盒子；没有向外的路由（{route}）",
    "verdict.raw_opened": "已打开：{what}",
    "verdict.raw_ok": "原始套接字和数据包套接字被拒绝",
    "verdict.ipv6_route": "内核有一条向外的 IPv6 路由",
    "verdict.ipv6_ok": "没有 IPv6 路由（{error}）",
    "verdict.no_proxy_env": "盒子里没有出站代理（HTTPS_PROXY）",
    "verdict.name_not_refused": "{name} 未被拒绝（{answers}）",
    "verdict.name_logged": "{name} 的出站日志：{decisions}",
    "verdict.name_ok": "{name}：CONNECT 和普通 HTTP 都得到 403，日志记为 deny",
    "verdict.no_proxy": "盒子里没有出站代理",
    "verdict.proxy_reached": "代理到达了主机的环回地址",
    "verdict.targets_open": "未被拒绝：{open}；没有恰好一条 deny 日志：{unlogged}",
    "verdict.targets_ok": "已拒绝并记录：{targets}",
    "verdict.writable": "在盒内可写：{paths}",
    "verdict.renamed": "在盒内被改名：{paths}",
    "verdict.not_in_workspace": "不在工作区里：{paths}",
    "verdict.nothing_protected": (
        "这里没有可供测试的受保护内容（没有 .git、Dockerfile……）：请在 git 仓库里运行 selftest"
    ),
    "verdict.protected_ok": "只读，未被改名：{paths}",
    "verdict.parent_renamed": "在盒内被改名（受保护路径随之移动，它的名字就空出来了）：{paths}",
    "verdict.no_parents": "这里没有位于某个文件夹之下的受保护路径",
    "verdict.parents_ok": "未被改名：{paths}",
    "verdict.gitfile_writable": (
        "工作区的 .git 文件（链接的工作树）可在盒内被改写或移动：盒子自己的 `gitdir:` 会把你的 "
        "git 带到那里"
    ),
    "verdict.gitfile_ok": ".git 是文件（链接的工作树）：只读",
    "verdict.git_is": "工作区的 .git：{git}",
    "verdict.repo_reached": "到达了你的仓库：{what}",
    "verdict.git_moved": ".git 在盒内被移走，{replace}",
    "verdict.git_ok": "commondir：{commondir}，不在你的仓库里；.git 未被替换（{replace}）",
    "verdict.sudo_gave": "sudo -n 给出了 uid {uid}",
    "verdict.setuid_root": "已经是 uid 0（flowerbox 以 root 运行）；CapBnd 为 0：没有可得的",
    "verdict.sudo_refused": "sudo 被拒绝",
    "verdict.sudo_absent": "没有 sudo",
    "verdict.su_unseen": "无法观察到 su 的凭据",
    "verdict.no_su": "没有 setuid-root 的 su；{sudo}",
    "verdict.su_gained": "su（setuid root）以 euid {euid}、CapEff {eff} 运行",
    "verdict.su_ok": "su（setuid root）什么也没得到：euid {euid}，没有能力；{sudo}",
    "verdict.left": "遗留：{what}",
    "verdict.survivor_ok": "盒子结束后没有东西存活（进程：{process}，容器：{container}）",
    "verdict.kernel_seen": "主机以 {process} 运行盒子（uid {uid}）",
    "verdict.kernel_unseen": "这里看不到盒子的进程（{error}）",
    "verdict.boot_unknown": "启动时间未知（盒子 {box}，主机 {host}）",
    "verdict.booted_after": "它的内核比主机的晚 {seconds} 秒启动",
    "verdict.booted_with": "它的内核与主机的同时启动（{btime}）",
    "verdict.runc_yet": "要求的是 runc，但{seen}",
    "verdict.runc_ok": (
        "主机的内核（runc，如所要求；--runtime runsc 会在中间放上 gVisor 的内核）：{seen}；{booted}"
    ),
    "verdict.runsc_default": "runsc 的默认",
    "verdict.gvisor_ok": "gVisor（{platform} 平台）：{seen}，代理的进程都不是主机进程；{booted}",
    "verdict.gvisor_log": "{why}；它的日志：{log}",
    "verdict.not_gvisor": "要求的是 runsc，但{seen}；{booted}：不是 gVisor 的内核",
    "verdict.pids_unlimited": "启动了 {started} 个线程，没有碰到限制",
    "verdict.pids_ok": "第 {task} 个任务被拒绝（限制 {limit}）",
    "verdict.silent": "没有观察结果：探针没有报告",
    "verdict.no_observation": "没有观察结果",
    "verdict.broke": "探针出错：{why}",
    "verdict.unreadable": "观察结果无法读取（{problem}）",
    "verdict.hung": "卡住了（{seconds} 秒内没有应答）",
    "verdict.call_hung": "{what}{hung}",
    "verdict.dotenv_yours": "你自己的 .env 在这里，在盒内为空且只读：重定向被拒绝",
    "verdict.dotenv_planted": "一个把密钥发往探针服务器的 .env，带有 PYTHONPATH",
    "verdict.dotenv_writable": "工作区的 .env 在盒内可写（{plant}）",
    "verdict.dotenv_yielded": "凭据查找从中取了 {keys}",
    "verdict.dotenv_from": "{keys} 来自 ./.env",
    "verdict.server_got": "探针服务器收到了 {got}",
    "verdict.sitecustomize_ran": "它的 sitecustomize.py 在主机上运行了",
    "verdict.dotenv_ok": (
        "{what}；flowerbox 的凭据查找没有从 ./.env 读取任何东西，没有东西到达探针服务器，它的代码"
        "没有运行"
    ),
    "verdict.forged_listed": "ps 列出了它",
    "verdict.forged_found": "stop/resume 找到了它",
    "verdict.forged_blocks": "新的运行因它被拒绝",
    "verdict.outside_changed": "它指向的外部文件夹被改动：{names}",
    "verdict.forged": "在 runs/flowerbox 中伪造的运行中的运行 {run}：{problems}",
    "verdict.forged_ok": (
        "在 runs/flowerbox/ 中伪造的运行中的运行 {run}（指向外部文件夹）对主机而言不是运行："
        "不被列出，无法按 id 找到，不阻挡任何东西"
    ),
    "verdict.reading_questions": "读取问题",
    "verdict.reading_asks": "读取 asks.json",
    "verdict.questions_read": "通过链接读到了问题：{value}",
    "verdict.questions_broke": "读取问题出错：{value}",
    "verdict.zero_read": "asks.json -> /dev/zero 被读取了（{value}）",
    "verdict.answer_dropped": "一个回答通过 inbox 链接投递了出去（{value}）",
    "verdict.written_outside": "外部文件夹中被写入：{names}",
    "verdict.links_ok": (
        "asks.json -> /dev/zero：没有问题，在 {seconds} 秒内作为链接被拒绝；投进 inbox -> 外部"
        "文件夹的回答：被拒绝，那里没有写入任何东西"
    ),
    "verdict.fifos_in_kernel": (
        "盒子建了它的 FIFO，但主机上一个也没有：它的内核保留着它们（绑定挂载里的 gVisor FIFO "
        "存在于它自己的内核中），所以主机的读取不会卡在上面"
    ),
    "verdict.events_file": "事件文件",
    "verdict.gateway_meter": "网关计量文件",
    "verdict.fifo_hung": "读取{what}（一个 FIFO）{hung}",
    "verdict.fifo_read": "{what}是一个 FIFO，却被当作文件读取了（{value}）",
    "verdict.cost_hung": "运行的费用{hung}",
    "verdict.fifos_ok": (
        "事件文件和网关计量文件处的 FIFO：被拒绝，没有为读取而打开，用时 {seconds} 秒；费用从主机"
        "自己的账本读取"
    ),
    "verdict.hook_no_git": "未测试：工作区不是 git 仓库（请在 git 仓库里运行 selftest）",
    "verdict.not_planted": "未放置：{plant}",
    "verdict.and": " 和 ",
    "verdict.status_ran": "你的 `git status` 运行了盒子的 {ran}",
    "verdict.status_failed": "你的 `git status` 失败了（{code}：{stderr}）",
    "verdict.hook_folder": "一个指向含钩子和 core.fsmonitor 的文件夹的 commondir",
    "verdict.hook_file": "你的 .git 是文件（链接的工作树），在盒内只读",
    "verdict.hook_ok": "{planted}：你的 .git 没有 commondir，你的 `git status` 没有运行钩子",
    "verdict.no_git_plant": "盒子没有报告它的 git 放置物",
    "verdict.host_silent": "主机一侧没有报告：{why}",
    "egress.listed": "已列出：{entry}",
    "egress.kind.public": "公网",
    "egress.kind.cloud metadata": "云元数据",
    "egress.kind.loopback": "环回",
    "egress.kind.link-local": "链路本地",
    "egress.kind.unique-local": "唯一本地",
    "egress.kind.private": "私有",
    "egress.kind.not public": "非公网",
    "egress.an_address": "IP 地址（{kind}）",
    "egress.a_name": "{kind}名称",
    "egress.wildcard_note": "；通配符从不覆盖它",
    "egress.numeric_name": "一个读起来像 IP 地址的数字名称；请使用该地址",
    "egress.no_address": "解析不到任何地址",
    "egress.resolves_to": (
        "解析到 {address}（{kind}），它不在允许列表中（用 --allow {address} 允许）"
    ),
    "egress.resolved": "解析到公网地址或已列出的地址",
    "egress.empty_list": "允许列表中，而列表是空的：没有网络",
    "egress.the_list": "允许列表中",
    "egress.not_listed": "{what}不在{where}{note}（用 --allow {entry} 允许）",
    "reach.more": "；还有 {count} 项",
    "reach.refused": (
        "这个请求让 API 伸出盒子之外（{shown}）；已拒绝，因为 API 会用运行的密钥去获取或外呼。"
        "传 --allow-api-fetch 允许它，或对 URL 来源的主机传 --allow HOST"
        "（docs/gateway.md，No way out through the API）"
    ),
    "reach.mcp_servers": "mcp_servers（{servers}）",
    "reach.container": "一个容器",
    "reach.tools_not_list": "不是对象列表的 tools",
    "reach.server_tool": "服务器工具 {tool}",
    "reach.unknown_source": "{block} 的来源属于它不认识的种类",
    "reach.a_block": "一个块",
    "reach.file_id": "{block} 的 file_id",
    "reach.server_call": "一个 {block} 块（API 发起的调用）",
    "reach.a_blocks": "一个块的",
    "reach.source_from": "{block} 来源于 {url}",
    "reach.source_file": "{block} 来源于一个 file_id",
    "reach.servers": "{count} 个服务器",
    "verdict.pod_log_over": "探针 Pod 的日志超过 {limit} 字节：其中没有任何内容被判定",
    "verdict.reported_twice": "报告了两次：Pod 里还有别的东西以这个探针的名义输出了一行",
    "verdict.process": "进程 {pid}",
    "verdict.container": "容器 {name}",
    "verdict.git_replaced": ".git 被替换了",
    "verdict.commondir_appeared": "出现了 .git/commondir",
    "egress.unsupported_method": "不支持的方法（{method}）",
    "egress.send_connect": "{problem}；请发送 CONNECT host:port",
    "egress.https_plain": (
        "普通形式的 https:// URL；请发送 CONNECT host:443（设置了 HTTPS_PROXY 时客户端会这么做）"
    ),
    "egress.not_proxy_request": (
        "不是代理请求；请发送绝对 URL（http://host/path）或 CONNECT host:port"
    ),
    "egress.cannot_resolve": "无法解析 {host}：{problem}",
    "egress.cannot_reach": "无法连接 {where}：{error}",
    # -- the step's own budget stop
    "runtime.budget_spent": "运行的预算 ${budget} 已用完",
}
