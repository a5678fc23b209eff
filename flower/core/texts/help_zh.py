"""The help of both command lines in Chinese, keyed by the English help text itself.

The command tree is built in English (the docstrings and `help=` strings, which docs/cli/ is
generated from); under `--lang zh` flower.cli.helplang swaps each text for its entry here
before the help is drawn. A test checks every help text of both trees has an entry, and that
each entry keeps the English one's options and `code`. Plain data: no import.
"""

HELP_ZH: dict[str, str] = {
    'Run long-horizon work with Claude Code. Start with: flower "what you want done"': (
        '用 Claude Code 跑长时间的工作。从这里开始：flower "你要做的事"'
    ),
    "Print the version and exit.": "打印版本并退出。",
    (
        "The language of what flower prints and what the model is shown (default: $FLOWER_LANG, "
        "else zh under a zh_* locale, else en). Accepted anywhere on the line."
    ): (
        "flower 打印的内容和模型看到的内容所用的语言（默认：$FLOWER_LANG，否则 zh_* 区域设置下为 "
        "zh，否则 en）。可以写在命令行的任何位置。"
    ),
    "Install completion for the current shell.": "为当前 shell 安装补全。",
    "Show completion for the current shell, to copy it or customize the installation.": (
        "显示当前 shell 的补全脚本，用来复制或自定义安装。"
    ),
    "Report tokens, cost, tool calls, denials, errors and compactions of a finished run.": (
        "报告一次已结束运行的 token、花费、工具调用、拒绝、错误和压缩。"
    ),
    "The run directory to report on.": "要报告的运行目录。",
    "Print the report as JSON.": "以 JSON 打印报告。",
    "Answer a question a run is waiting on.": "回答一次运行正在等的问题。",
    "The question's id, as `flower status` shows.": "问题的编号，即 `flower status` 显示的那个。",
    "Your answer.": "你的回答。",
    "Where sessions, manifest and lineage are kept.": "会话、清单和谱系保存的地方。",
    "Run a whole clarify -> goal -> work -> verdict cycle offline, on a scripted model.": (
        "在脚本化的模型上离线跑一整轮 澄清 -> 目标 -> 干活 -> 判定。"
    ),
    "Keep the scratch workspace afterwards.": "结束后保留临时工作区。",
    "Clarify the ask, freeze a goal, and work on it until a judge says it is achieved.": (
        "澄清需求，定下目标，然后一直干活，直到评审判定达成。"
    ),
    "What you want done, in one line.": "你要做的事，一行说完。",
    "The folder the work happens in.": "干活所在的文件夹。",
    "Start over: archive the brief and goal, wake nothing.": (
        "重新开始：归档需求书和目标，不唤醒任何东西。"
    ),
    (
        "Continue the run in this workspace (what `flowerbox resume` runs): an ask it was "
        "already given adds nothing; else start with the ask."
    ): (
        "继续这个工作区里的运行（`flowerbox resume` 运行的就是它）：已经给过的需求不再追加；"
        "否则以这个需求开始。"
    ),
    "Workers in their own git worktrees.": "工作者各自在自己的 git 工作树里干活。",
    "Stop once the brief is frozen.": "需求书冻结后就停下。",
    "No goal and no judge: just do the work.": "不设目标、不要评审：只干活。",
    "Judged rounds of work at most.": "最多几轮评审过的工作。",
    "Let the judge run commands (Bash).": "允许评审运行命令（Bash）。",
    "Questions the agents may ask you (0 = none).": "代理最多可以问你几个问题（0 = 不问）。",
    (
        "Seconds to wait for an answer; 0 = fully unattended. Default: 1800 on a terminal (or "
        "where $FLOWER_ANSWER_COMMAND says how answers come), else 0."
    ): (
        "等回答的秒数；0 = 完全无人值守。默认：在终端上（或 $FLOWER_ANSWER_COMMAND "
        "说明了回答从哪来时）为 1800，否则为 0。"
    ),
    "Do not spill old big tool results on resume.": "续跑时不把旧的大工具结果移出上下文。",
    "Model id or alias (sonnet, opus...).": "模型 id 或别名（sonnet、opus……）。",
    "Stop spending once the run has cost this many USD.": "运行花费达到这么多美元后停止花钱。",
    (
        "Attempts a step gets at most when the API or the network fails (1: none again; default 8)."
    ): ("API 或网络出错时，一个步骤最多尝试几次（1：不再重试；默认 8）。"),
    (
        "How long a step waits for the API to be reachable again before it gives up (default 3600)."
    ): ("一个步骤等 API 重新可达多久后放弃（默认 3600 秒）。"),
    "Say where each credential came from.": "说明每个凭据从哪里来。",
    (
        "Write every event as a JSON line to this file (flowerbox logs and flower report read "
        "it) [default: RUN_DIR/events/<run id>.jsonl]."
    ): (
        "把每个事件作为一行 JSON 写进这个文件（flowerbox logs 和 flower report 读它）[默认："
        "RUN_DIR/events/<运行编号>.jsonl]。"
    ),
    "Print a machine-readable summary on stdout at the end.": (
        "结束时在 stdout 打印机器可读的摘要。"
    ),
    (
        "With --isolate, what becomes of the work at the end: branch (the default: it stays on "
        "the branch flower/<run id>), merge (also merged into your checkout once the goal is "
        "achieved), patch (also written to runs/patches/<run id>.patch)."
    ): (
        "配合 --isolate，工作最后怎么处理：branch（默认：留在分支 flower/<运行编号> 上）、"
        "merge（目标达成后还合并进你的检出）、patch（还写成 runs/patches/<运行编号>.patch）。"
    ),
    "Run one step and exit: 0 if it succeeded, 1 if it failed, 2 on bad input.": (
        "跑一个步骤就退出：成功为 0，失败为 1，输入有误为 2。"
    ),
    "What the agent should do.": "代理该做什么。",
    "Stop the step once it has cost this many USD.": "步骤花费达到这么多美元后停下。",
    "Tools the agent may use without asking (repeatable).": "代理不用询问就能用的工具（可重复）。",
    "A workbench in the run dir's workbench/ (for `run`: if the workflow has none).": (
        "在运行目录的 workbench/ 里建工作台（对 `run`：工作流自己没有时）。"
    ),
    "Draw the run: steps, rounds, attempts, faults, handoffs, waits, cost and context.": (
        "画出这次运行：步骤、轮次、尝试、故障、交接、等待、花费和上下文。"
    ),
    "The run directory (manifest.json, events/...).": "运行目录（manifest.json、events/……）。",
    "The run's workspace: its processes are drawn.": "运行的工作区：会画出它的进程。",
    "The HTML page [default: RUN_DIR/report.html].": "HTML 页面 [默认：RUN_DIR/report.html]。",
    "Also write the picture as SVG here.": "同时把图写成 SVG 存到这里。",
    "Also write it as PNG here (needs a headless Chromium).": (
        "同时写成 PNG 存到这里（需要无头 Chromium）。"
    ),
    "Continue the unfinished run here: its brief, goal and sessions, nothing redone.": (
        "继续这里没跑完的运行：沿用它的需求书、目标和会话，不重做任何事。"
    ),
    (
        "Run a user's Workflow: 0 if every step passed, 1 if one failed, 3 if it stopped\n"
        "waiting for a human, 130 if stopped."
    ): (
        "运行用户自己的 Workflow：每个步骤都通过为 0，有一个失败为 1，停下来等人为 3，被中止为 "
        "130。"
    ),
    "A Python file defining `workflow` or `build()`.": (
        "一个定义了 `workflow` 或 `build()` 的 Python 文件。"
    ),
    "Tell a run something it did not ask for; it reaches the agent at its next turn.": (
        "告诉运行一件它没问的事；代理在下一轮收到。"
    ),
    "What to tell the agents.": "要告诉代理的话。",
    "Save credentials to the global .env and check them: 0 if they work, 2 if not.": (
        "把凭据保存到全局 .env 并检查：能用为 0，不能用为 2。"
    ),
    (
        "Model id to use; written as ANTHROPIC_MODEL, ANTHROPIC_DEFAULT_OPUS_MODEL and "
        "ANTHROPIC_DEFAULT_SONNET_MODEL together."
    ): (
        "要用的模型 id；同时写成 ANTHROPIC_MODEL、ANTHROPIC_DEFAULT_OPUS_MODEL 和 "
        "ANTHROPIC_DEFAULT_SONNET_MODEL。"
    ),
    "Read the key from this environment variable instead of prompting (CI).": (
        "从这个环境变量读密钥，而不是提示输入（CI 用）。"
    ),
    "API endpoint (a gateway or proxy); written as ANTHROPIC_BASE_URL.": (
        "API 端点（网关或代理）；写成 ANTHROPIC_BASE_URL。"
    ),
    "The secret is a bearer token (ANTHROPIC_AUTH_TOKEN), not an API key.": (
        "这个密钥是 bearer token（ANTHROPIC_AUTH_TOKEN），不是 API key。"
    ),
    "Check the credentials with one request.": "用一次请求检查凭据。",
    "Show a run's steps, sessions, cost, errors and pending questions.": (
        "显示一次运行的步骤、会话、花费、错误和在等的问题。"
    ),
    "The run directory (sessions.db, manifest.json...).": (
        "运行目录（sessions.db、manifest.json……）。"
    ),
    "Redraw as the run writes, until it ends (or Ctrl+C).": (
        "随运行的写入重画，直到它结束（或 Ctrl+C）。"
    ),
    "Print the data as JSON (one line per redraw).": "以 JSON 打印数据（每次重画一行）。",
    "The run's workspace: also show (and follow) its workbench.": (
        "运行的工作区：同时显示（并跟随）它的工作台。"
    ),
    "Only this run (its id, or the id's unique start), as flower and flowerbox print it.": (
        "只看这次运行（它的编号，或编号的唯一开头），即 flower 和 flowerbox 打印的那个。"
    ),
    'Run flower unattended in a hardened container: flowerbox "what you want done"': (
        '在加固的容器里无人值守地运行 flower：flowerbox "你要做的事"'
    ),
    "Answer a question a run waits on (on kube: a small Job drops it into its inbox).": (
        "回答一次运行在等的问题（在 kube 上：一个小 Job 把回答放进它的收件箱）。"
    ),
    "The question's id (q1...), as ps shows.": "问题的编号（q1……），即 ps 显示的那个。",
    "A run id, or its unique start (default: the newest here).": (
        "运行编号，或它的唯一开头（默认：这里最新的）。"
    ),
    "The project folder (default: here).": "项目文件夹（默认：当前目录）。",
    (
        "local: this machine's engine. kube: a Kubernetes cluster, the kubeconfig's "
        "(docs/deployment.md, Kubernetes)."
    ): (
        "local：本机的引擎。kube：Kubernetes 集群，即 kubeconfig 指向的那个（docs/deployment.md，"
        "Kubernetes）。"
    ),
    "On kube: the namespace.": "在 kube 上：命名空间。",
    "On kube: the kubeconfig context (default: its current).": (
        "在 kube 上：kubeconfig 的上下文（默认：当前的）。"
    ),
    (
        "Follow a live run; a typed line answers its question. Ctrl+C detaches.\n"
        "\n"
        "On a terminal a typed line answers the oldest pending question, or is sent to the run\n"
        "when none is pending. Ctrl+C leaves the run going (exit 0), as `gh run watch` or\n"
        "`kubectl logs -f` do; `flowerbox stop` stops it. Ends with the run's exit code."
    ): (
        "跟随一次进行中的运行；输入一行即回答它的问题。Ctrl+C 脱离。\n"
        "\n"
        "在终端上，输入的一行回答最早的待答问题；没有待答问题时，发给运行。\n"
        "Ctrl+C 让运行继续（退出码 0），和 `gh run watch`、`kubectl logs -f` 一样；\n"
        "`flowerbox stop` 才停止它。以运行的退出码结束。"
    ),
    "A run id, or its unique start (default: the newest run here).": (
        "运行编号，或它的唯一开头（默认：这里最新的运行）。"
    ),
    (
        "Serve every run on this host with one key, a token per run and a team budget, until\n"
        "Ctrl+C; runs started meanwhile use it instead of a private gateway (docs/deployment.md)."
    ): (
        "用一把密钥服务这台主机上的每次运行，每次运行一个 token，全队共享预算，直到\n"
        "Ctrl+C；期间启动的运行用它，而不是各自私有的网关（docs/deployment.md）。"
    ),
    "USD across all runs; model calls past it are refused (kept in the ledger).": (
        "所有运行合计的美元上限；超出后的模型调用被拒绝（记在账本里）。"
    ),
    "A JSON price table laid over the shipped one.": "叠加在自带价格表之上的 JSON 价格表。",
    (
        "Never ask the Docker engine (a broker in a container has none): a run registered before "
        "a restart is served while its socket folder exists."
    ): (
        "从不询问 Docker 引擎（容器里的 broker 没有引擎）：重启前登记的运行，只要它的 socket "
        "文件夹还在就继续服务。"
    ),
    "Print what a running broker serves, as JSON.": "以 JSON 打印正在运行的 broker 服务着什么。",
    (
        "Serve a cluster's runs over TCP here (the API), each told by its token; the runs are "
        "learned from their token Secrets (in-cluster, else KUBECONFIG)."
    ): (
        "在这里通过 TCP 服务集群的运行（API），按各自的 token 区分；运行从它们的 token Secret "
        "得知（集群内，否则 KUBECONFIG）。"
    ),
    "With --listen: the egress proxy's port, same host.": (
        "配合 --listen：出口代理的端口，同一主机。"
    ),
    (
        "With --listen: the git relay's port, same host (served when the credentials hold "
        "GIT_TOKEN and GIT_HOST)."
    ): ("配合 --listen：git 中继的端口，同一主机（凭据里有 GIT_TOKEN 和 GIT_HOST 时才服务）。"),
    (
        "With --listen: a .env file with the key (a mounted Secret), instead of the environment "
        "and the user's .env."
    ): ("配合 --listen：含密钥的 .env 文件（挂载的 Secret），代替环境变量和用户的 .env。"),
    (
        "With --listen: the folder of the SQLite ledger and the runs' records (default: the "
        "broker's state folder, listen/)."
    ): ("配合 --listen：SQLite 账本和运行记录所在的文件夹（默认：broker 的状态文件夹 listen/）。"),
    "With --listen: the namespace of the run tokens.": "配合 --listen：运行 token 所在的命名空间。",
    (
        "Serve Prometheus metrics at http://HOST:PORT/metrics: runs, spend, budgets, requests by "
        "outcome, upstream latency, egress decisions (docs/deployment.md)."
    ): (
        "在 http://HOST:PORT/metrics 提供 Prometheus 指标：运行、花费、预算、按结果分的请求、"
        "上游延迟、出口决定（docs/deployment.md）。"
    ),
    (
        "Build the image from a flowerbox checkout of this flowerbox's version (again, if it is\n"
        "there), labelled with that version: works from an installed flowerbox too."
    ): (
        "用与这个 flowerbox 版本相同的 flowerbox 检出构建镜像（已有也重建），并标上这个版本：\n"
        "从安装的 flowerbox 也能用。"
    ),
    (
        "A flowerbox checkout (its Dockerfile). Default: the current folder when it is one, else "
        "the checkout this flowerbox runs from (an editable install)."
    ): (
        "一个 flowerbox 检出（它的 Dockerfile）。默认：当前文件夹是检出时用它，否则用这个 "
        "flowerbox 运行所在的检出（可编辑安装）。"
    ),
    "The flowerbox image to run.": "要运行的 flowerbox 镜像。",
    "Build the image on this base image.": "在这个基础镜像上构建镜像。",
    (
        "Push an ended cluster run's branch back as flowerbox/RUN, through the broker's relay;\n"
        "here, bring back the commits of a run that could not bring them back when it ended."
    ): (
        "通过 broker 的中继，把已结束的集群运行的分支推回为 flowerbox/RUN；\n"
        "在本机：取回一次结束时没能取回提交的运行的提交。"
    ),
    "The run id (`flowerbox ps` lists them; with --on kube, a cluster's).": (
        "运行编号（`flowerbox ps` 列出它们；配合 --on kube，是集群的）。"
    ),
    "On kube: the broker's Service name.": "在 kube 上：broker 的 Service 名。",
    "The whole appliance (box, gateway, isolation) on the built-in scripted model: no key.": (
        "整套装置（容器、网关、隔离）跑在内置的脚本化模型上：不需要密钥。"
    ),
    (
        "The agent's container runtime. runsc: gVisor, a user-space kernel between the agent and "
        "yours (`sudo bash docker/engine.sh --gvisor` registers it; on kube: the gvisor "
        "RuntimeClass). The gateway stays on runc."
    ): (
        "代理容器的运行时。runsc：gVisor，隔在代理和你的内核之间的用户态内核（`sudo bash "
        "docker/engine.sh --gvisor` 注册它；在 kube 上：gvisor RuntimeClass）。网关仍用 runc。"
    ),
    "Check engine, image, credentials, workspace, gateway and proxy; a fix for each miss.": (
        "检查引擎、镜像、凭据、工作区、网关和代理；每个缺失都给出修法。"
    ),
    (
        "Let the agent reach DOMAIN (exact; *.x.y for its subdomains). Repeatable. Nothing else "
        "is reachable (docs/egress.md)."
    ): (
        "允许代理访问 DOMAIN（精确匹配；*.x.y 表示其子域名）。可重复。"
        "其他一律不可达（docs/egress.md）。"
    ),
    "Allow a preset's domains.": "允许一个预设的域名。",
    (
        "allowlist: only what --allow lists, through the proxy. open: the agent's container gets "
        "a network of its own (nothing filtered or logged)."
    ): (
        "allowlist：只允许 --allow 列出的，经过代理。open：代理容器有自己的网络（不过滤、不记录）。"
    ),
    (
        'flower "ask" in the box; any other option goes to flower (--timeout 0, --json...).\n'
        "\n"
        "As with flower, where stdin is not a terminal (a script, CI) the agents' questions are\n"
        "not waited for, unless you pass --timeout SECONDS (then `flowerbox answer` answers "
        "them)\n"
        "or $FLOWER_ANSWER_COMMAND says how answers come.\n"
        "\n"
        "With --on kube the box is a Job on the cluster, its workspace cloned from --repo, and\n"
        "this prints its run id (`flowerbox ps --on kube` lists the runs)."
    ): (
        '在容器里运行 flower "需求"；其他选项都交给 flower（--timeout 0、--json……）。\n'
        "\n"
        "和 flower 一样，stdin 不是终端时（脚本、CI），不等代理的问题，\n"
        "除非你给了 --timeout SECONDS（这时用 `flowerbox answer` 回答）\n"
        "或 $FLOWER_ANSWER_COMMAND 说明了回答从哪来。\n"
        "\n"
        "配合 --on kube，容器是集群上的一个 Job，工作区从 --repo 克隆，\n"
        "并打印它的运行编号（`flowerbox ps --on kube` 列出这些运行）。"
    ),
    "No git worktrees for the workers.": "不给工作者建 git 工作树。",
    "The gateway refuses calls past this many USD.": "网关拒绝超出这么多美元的调用。",
    "Run in the background: print the run id and return (see ps).": (
        "在后台运行：打印运行编号后返回（见 ps）。"
    ),
    (
        "Let request bodies make the API fetch or call out with the key: URL and file sources, "
        "server tools (Claude Code's WebSearch), MCP servers (docs/gateway.md)."
    ): (
        "允许请求体让 API 带着密钥去取东西或向外调用：URL 和文件来源、服务端工具（Claude Code 的 "
        "WebSearch）、MCP 服务器（docs/gateway.md）。"
    ),
    "Stop the run (resumable) once its folders grew by this many GB; 0: no limit.": (
        "运行的文件夹增长到这么多 GB 后停止运行（可续跑）；0：不限。"
    ),
    "Stop the run (resumable) once it made this many files and folders; 0: no limit.": (
        "运行建了这么多文件和文件夹后停止运行（可续跑）；0：不限。"
    ),
    "On kube: the https git remote a run works on.": "在 kube 上：运行所用的 https git 远端。",
    "On kube: the branch or tag it starts from.": "在 kube 上：运行起点的分支或标签。",
    "On kube: the Pods' runtimeClassName (gvisor...).": (
        "在 kube 上：Pod 的 runtimeClassName（gvisor……）。"
    ),
    (
        "On kube: deliver as the branch flowerbox/RUN, which the forge's CI may run on (default: "
        "refs/flowerbox/RUN, which no CI runs on; docs/deployment.md)."
    ): (
        "在 kube 上：交付为分支 flowerbox/RUN，代码托管平台的 CI 可能会在上面运行（默认："
        "refs/flowerbox/RUN，没有 CI 会在上面运行；docs/deployment.md）。"
    ),
    (
        "Render a run's manifests, apply the broker's; the runs themselves are `--on kube` "
        "(docs/deployment.md, Kubernetes)."
    ): (
        "渲染运行的清单，应用 broker 的清单；运行本身用 `--on kube`（docs/deployment.md，"
        "Kubernetes）。"
    ),
    "Apply the broker's manifests (what `render --broker-manifests` prints).": (
        "应用 broker 的清单（即 `render --broker-manifests` 打印的）。"
    ),
    (
        'Print every manifest as YAML: exactly what `flowerbox "ask" --on kube` (or `kube\n'
        "apply-broker`) applies."
    ): (
        '以 YAML 打印每份清单：正是 `flowerbox "ask" --on kube`（或 `kube\n'
        "apply-broker`）应用的内容。"
    ),
    "What the run is to do.": "运行要做什么。",
    "The run's id (default: a new one).": "运行的编号（默认：新的一个）。",
    "The broker's manifests instead.": "改为 broker 的清单。",
    (
        "Show a run's events (flower's own rendering); -f follows a live run to its end.\n"
        "\nWith --on kube: the agent's output as its Pod wrote it (the run's newest Job)."
    ): (
        "显示一次运行的事件（flower 自己的呈现）；-f 跟随进行中的运行直到结束。\n"
        "\n配合 --on kube：代理的输出，即它的 Pod 写下的（运行最新的 Job）。"
    ),
    "Keep following until the run ends.": "一直跟随到运行结束。",
    "The API requests the run's gateway answered, one per line.": (
        "运行的网关回答过的 API 请求，每行一个。"
    ),
    "With --requests: print them as JSON.": "配合 --requests：以 JSON 打印。",
    'flower once "prompt" in the box (one step, for CI jobs).': (
        '在容器里运行 flower once "提示"（一个步骤，给 CI 任务用）。'
    ),
    "List the runs (newest last) and the questions they wait on.": (
        "列出运行（最新的在最后）和它们在等的问题。"
    ),
    "Every workspace's runs.": "所有工作区的运行。",
    "Print the runs as JSON.": "以 JSON 打印运行。",
    "Draw a run as `flower report` does: steps, rounds, faults, waits, cost, context.": (
        "像 `flower report` 那样画出一次运行：步骤、轮次、故障、等待、花费、上下文。"
    ),
    "The HTML page [default: report.html in the run's host-only records].": (
        "HTML 页面 [默认：运行在主机上的记录里的 report.html]。"
    ),
    (
        "Continue a run that ended: a new box, the same settings, the same sessions.\n"
        "\n"
        "flower resumes each step's session from the workspace's runs/ (lineage.json); the new\n"
        "box gets a new run id, and its meta names the run it resumed. With --on kube: a new "
        "Job\non the run's volume, with the command and image its volume recorded."
    ): (
        "继续一次已结束的运行：新的容器，同样的设置，同样的会话。\n"
        "\n"
        "flower 从工作区的 runs/（lineage.json）续上每个步骤的会话；新容器\n"
        "有新的运行编号，它的 meta 记着它续的是哪次运行。配合 --on kube：在运行的卷上起一个新 "
        "Job，\n用卷里记录的命令和镜像。"
    ),
    "In the background, or on this terminal (default: as the run was).": (
        "在后台，或在这个终端上（默认：和原来的运行一样）。"
    ),
    "USD for the rest of the run (default: what is left of its budget).": (
        "运行余下部分的美元数（默认：它预算里剩下的）。"
    ),
    "Remove an ended cluster run: its Jobs, volume, network policy and token (no resume).": (
        "删除一次已结束的集群运行：它的 Job、卷、网络策略和 token（不能再续跑）。"
    ),
    "The run id (`flowerbox ps --on kube` lists them).": (
        "运行编号（`flowerbox ps --on kube` 列出它们）。"
    ),
    (
        "flower run FILE.py in the box; any other option goes to flower (--timeout 0, -W...).\n"
        "\n"
        "Off a terminal its questions are not waited for unless you pass --timeout SECONDS, as\n"
        'with `flowerbox "ask"`.'
    ): (
        "在容器里运行 flower run FILE.py；其他选项都交给 flower（--timeout 0、-W……）。\n"
        '\n不在终端上时不等它的问题，除非你给了 --timeout SECONDS，\n和 `flowerbox "ask"` 一样。'
    ),
    "A Python file in the workspace (`workflow`).": "工作区里的一个 Python 文件（`workflow`）。",
    (
        "Probe the box a run here would get for every way out; exit 1 on any FAIL.\n"
        "\n"
        "--negative-control runs the all-weak control (every probe should FAIL), --weaken one\n"
        "variant of flowerbox.selftest.controls (exactly its probes should FAIL); stderr says "
        "what\n"
        "was expected. With --on kube the probes run as a Job with a run's Pod spec (the "
        "control\ntoo), and its log is judged here."
    ): (
        "探测这里的运行会得到的容器的每条出路；有任何 FAIL 时退出码为 1。\n"
        "\n"
        "--negative-control 运行全弱的对照（每个探测都应 FAIL），--weaken 运行\n"
        "flowerbox.selftest.controls 的一个变体（恰好它的探测应 FAIL）；stderr 说明预期。\n"
        "配合 --on kube，探测作为一个 Job 用运行的 Pod 规格执行（对照也是），\n"
        "它的日志在这里评判。"
    ),
    (
        "The same probes in a deliberately weak container: every box probe should FAIL (four "
        "host-boundary checks judge flowerbox's own host code: they PASS)."
    ): (
        "在故意弄弱的容器里跑同样的探测：每个容器探测都应 FAIL（四项主机边界检查评判的是 "
        "flowerbox 自己的主机代码：它们 PASS）。"
    ),
    (
        "Break exactly one property (docs/selftest.md lists the variants, and "
        "joined_network:CONTAINER): exactly its probes should FAIL."
    ): (
        "恰好破坏一项属性（docs/selftest.md 列出各个变体，以及 joined_network:CONTAINER）："
        "恰好它的探测应 FAIL。"
    ),
    "One JSON object per probe.": "每个探测一个 JSON 对象。",
    "The box of a run without worktrees.": "不用工作树的运行所用的容器。",
    (
        "Tell a run something unprompted; a stopped run reads it when resumed (on kube: a\n"
        "small Job drops it into its inbox while it runs)."
    ): (
        "主动告诉运行一件事；已停止的运行在续跑时读到（在 kube 上：运行期间由一个\n"
        "小 Job 放进它的收件箱）。"
    ),
    "What to tell the run.": "要告诉运行的话。",
    (
        "Save your key to the global .env (0600) that flower and flowerbox read, and check it: 0 "
        "if it works, 2 if not. Inside a box only the gateway ever holds it."
    ): (
        "把你的密钥保存到 flower 和 flowerbox 都读的全局 .env（0600）并检查：能用为 0，不能用为 "
        "2。容器里只有网关持有它。"
    ),
    (
        "A shell in the agent's container: same hardening, mounts and gateway, no network.\n"
        "\n"
        "`flowerbox shell -- COMMAND...` runs COMMAND instead. On a terminal the container gets "
        "it\n"
        "(through the docker CLI: `docker run -it`); without one the command runs "
        "non-interactively\nand its output is streamed, as with `once`."
    ): (
        "代理容器里的一个 shell：同样的加固、挂载和网关，没有网络。\n"
        "\n"
        "`flowerbox shell -- COMMAND...` 改为运行 COMMAND。在终端上容器拿到终端\n"
        "（通过 docker CLI：`docker run -it`）；没有终端时命令以非交互方式运行，\n"
        "输出以流的形式传回，和 `once` 一样。"
    ),
    (
        "Stop a run: SIGTERM to flower, which records its step and exits 130 (resumable).\n"
        "\nWith --on kube: the run's Jobs are deleted; its volume stays for resume."
    ): (
        "停止一次运行：向 flower 发 SIGTERM，它记下当前步骤并以 130 退出（可续跑）。\n"
        "\n配合 --on kube：删除运行的 Job；它的卷留着供续跑。"
    ),
    "Print the versions that matter for a run: flowerbox, the SDK and its Claude Code CLI.": (
        "打印对一次运行要紧的版本：flowerbox、SDK 和它的 Claude Code CLI。"
    ),
    "With --listen: connections all addresses together may hold open (a thread and a head "
    "buffer each); past it, as past --max-per-peer.": (
        "使用 --listen 时：所有地址合计可保持打开的连接数（每个连接一个线程和一个请求头缓冲）；"
        "超过时，与超过 --max-per-peer 相同。"
    ),
    "With --listen: connections one address (a run's Pod) may hold open; one more is answered "
    "503 with retry-after and counted (`--status`, metrics).": (
        "使用 --listen 时：单个地址（一个运行的 Pod）可保持打开的连接数；再多一个会得到带 "
        "retry-after 的 503 并被计数（`--status`、metrics）。"
    ),
}
