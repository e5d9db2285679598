// The booth page: talk (or type) to Quicksilver over the websocket on this page's own
// host, watch the answer denoise step by step, hear it as it arrives.
//
// It speaks docs/protocol.md like any other client: 16 kHz PCM16 chunks in (capture.js
// resamples the microphone), events out. State a test or a kiosk script may read is kept
// on <body> as data attributes: state, drafts (received), drawn (painted), audioSamples.

const $ = (id) => document.getElementById(id);
const MASK = "░"; // a still-masked position in a draft (engine.tokenizer.MASK_GLYPH)
const PRE_ROLL_CHUNKS = 10; // 200 ms kept while not talking, sent when talking starts

// ------------------------------------------------------------------ PCM16 and base64

function encodePcm16(buffer) {
  const bytes = new Uint8Array(buffer);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function decodePcm16(base64) {
  const binary = atob(base64);
  const view = new DataView(new ArrayBuffer(binary.length));
  for (let i = 0; i < binary.length; i++) view.setUint8(i, binary.charCodeAt(i));
  const samples = new Float32Array(binary.length >> 1);
  for (let i = 0; i < samples.length; i++) samples[i] = view.getInt16(2 * i, true) / 32768;
  return samples;
}

// ------------------------------------------------------------------ audio

/** Plays answer audio chunks back to back as they arrive; stop() silences them at once. */
class Player {
  constructor(context) {
    this.context = context;
    this.sources = new Set();
    this.endsAt = 0;
  }

  play(samples, rate) {
    const buffer = this.context.createBuffer(1, samples.length, rate);
    buffer.copyToChannel(samples, 0);
    const source = this.context.createBufferSource();
    source.buffer = buffer;
    source.connect(this.context.destination);
    const at = Math.max(this.context.currentTime + 0.03, this.endsAt);
    source.start(at);
    this.endsAt = at + buffer.duration;
    this.sources.add(source);
    source.onended = () => this.sources.delete(source);
  }

  get playing() {
    return this.sources.size > 0;
  }

  stop() {
    for (const source of this.sources) source.stop();
    this.sources.clear();
    this.endsAt = 0;
  }
}

/** The microphone as 20 ms PCM16 chunks; opened once, on the first user gesture. */
class Microphone {
  constructor(context, onChunk) {
    this.context = context;
    this.onChunk = onChunk;
    this.opened = null;
  }

  open() {
    this.opened ??= this.#open();
    return this.opened;
  }

  async #open() {
    if (!navigator.mediaDevices?.getUserMedia) {
      throw new Error(
        "this browser gives no microphone to this page: open it as http://localhost:PORT " +
          "on this machine, or serve it over https; typing still works",
      );
    }
    // Echo cancellation keeps the answer out of a hands-free microphone; the browser's
    // noise suppression and gain control, tuned for human listeners, are left off:
    // Whisper was trained on unprocessed audio and hears numbers better without them.
    const stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: false, autoGainControl: false },
    });
    await this.context.audioWorklet.addModule("capture.js");
    const capture = new AudioWorkletNode(this.context, "quicksilver-capture");
    capture.port.onmessage = (message) => this.onChunk(message.data);
    const mute = this.context.createGain(); // keeps the worklet pulled, plays nothing
    mute.gain.value = 0;
    this.context.createMediaStreamSource(stream).connect(capture).connect(mute);
    mute.connect(this.context.destination);
  }
}

// ------------------------------------------------------------------ the page

class Booth {
  constructor() {
    this.socket = null;
    this.session = null;
    this.context = null; // AudioContext, made on the first gesture (autoplay rules)
    this.player = null;
    this.microphone = null;
    this.talking = false; // audio goes to the server
    this.preRoll = [];
    this.latestDraft = null;
    this.askedAt = null; // when the last question left (release or submit), for latency
    this.firstAudioAt = null;
    this.retry = 1000;
    this.counters = { drafts: 0, drawn: 0, audioSamples: 0 };
    this.bindControls();
    this.connect();
  }

  // -------------------------------------------------------------- connection

  connect() {
    const token = new URLSearchParams(location.search).get("token");
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const query = token ? `?token=${encodeURIComponent(token)}` : "";
    this.socket = new WebSocket(`${scheme}://${location.host}/${query}`);
    this.socket.onmessage = (message) => this.receive(JSON.parse(message.data));
    this.socket.onclose = (event) => this.closed(event);
  }

  closed(event) {
    this.setState("closed");
    this.enable(false);
    this.talking = false;
    const why = event.reason || (event.code === 1006 ? "refused or unreachable (a wrong ?token=?)" : `code ${event.code}`);
    this.status(`disconnected: ${why}; reconnecting…`);
    setTimeout(() => this.connect(), this.retry);
    this.retry = Math.min(this.retry * 2, 10000);
  }

  send(message) {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(message));
  }

  // -------------------------------------------------------------- controls

  bindControls() {
    const talk = $("talk");
    talk.addEventListener("pointerdown", (event) => {
      talk.setPointerCapture(event.pointerId);
      this.startTalking();
    });
    talk.addEventListener("pointerup", () => this.stopTalking());
    talk.addEventListener("pointercancel", () => this.stopTalking());
    addEventListener("keydown", (event) => {
      if (event.code !== "Space" || event.repeat || event.target === $("question")) return;
      event.preventDefault();
      this.startTalking();
    });
    addEventListener("keyup", (event) => {
      if (event.code === "Space" && event.target !== $("question")) this.stopTalking();
    });
    $("hands-free").addEventListener("change", (event) => this.handsFree(event.target.checked));
    $("ask").addEventListener("submit", (event) => {
      event.preventDefault();
      const text = $("question").value.trim();
      if (!text) return this.showError("type a question first");
      this.audio();
      this.interrupt();
      this.send({
        type: "conversation.item.create",
        item: { type: "message", role: "user", content: [{ type: "input_text", text }] },
      });
      $("question").value = "";
      this.asked();
    });
  }

  enable(on) {
    for (const id of ["talk", "hands-free", "question"]) $(id).disabled = !on;
    $("ask").querySelector("button").disabled = !on;
  }

  /** The audio context and microphone, made inside a user gesture as browsers require. */
  audio() {
    if (!this.context) {
      this.context = new AudioContext({ latencyHint: "interactive" });
      this.player = new Player(this.context);
      this.microphone = new Microphone(this.context, (chunk) => this.heard(chunk));
    }
    this.context.resume();
    return this.microphone;
  }

  async openMicrophone() {
    try {
      await this.audio().open();
      return true;
    } catch (error) {
      this.showError(`microphone: ${error.message}`);
      return false;
    }
  }

  async startTalking() {
    if (this.talking || $("talk").disabled || $("hands-free").checked) return;
    this.talking = true;
    $("talk").classList.add("active");
    this.interrupt();
    if (!(await this.openMicrophone())) this.talking = false;
  }

  stopTalking() {
    if (!this.talking || $("hands-free").checked) return;
    this.talking = false;
    $("talk").classList.remove("active");
    this.send({ type: "input_audio_buffer.commit" });
    this.asked();
  }

  async handsFree(on) {
    $("talk").disabled = on;
    this.talking = on && (await this.openMicrophone());
    if (on && !this.talking) $("hands-free").checked = false;
  }

  /** A microphone chunk: sent while talking, else kept as pre-roll. */
  heard(chunk) {
    if (!this.talking) {
      this.preRoll.push(chunk);
      if (this.preRoll.length > PRE_ROLL_CHUNKS) this.preRoll.shift();
      return;
    }
    for (const early of this.preRoll.splice(0)) this.append(early);
    this.append(chunk);
  }

  append(chunk) {
    this.send({ type: "input_audio_buffer.append", audio: encodePcm16(chunk) });
  }

  /** The user speaks over an answer: stop it here and on the server. */
  interrupt() {
    if (this.player?.playing) {
      this.player.stop();
      this.send({ type: "response.cancel" });
    }
  }

  asked() {
    this.askedAt = performance.now();
    this.firstAudioAt = null;
  }

  // -------------------------------------------------------------- events

  receive(event) {
    const handler = this.handlers[event.type];
    if (handler) handler.call(this, event);
  }

  handlers = {
    "session.created"(event) {
      this.session = event.session;
      this.retry = 1000;
      this.setState("ready");
      this.enable(true);
      this.status(`${this.session.model} · ${this.session.steps} steps · ${this.session.voice}`);
    },
    "input_audio_buffer.speech_started"(event) {
      this.player?.stop(); // the server has interrupted its answer too
      this.turn(event.item_id).user.textContent = "…";
    },
    "conversation.item.input_audio_transcription.delta"(event) {
      this.turn(event.item_id).user.textContent = `${event.transcript} …`;
    },
    "conversation.item.input_audio_transcription.completed"(event) {
      this.asked();
      this.turn(event.item_id).user.textContent = event.transcript || "(nothing heard)";
    },
    "conversation.item.created"(event) {
      this.turn(event.item.id).user.textContent = event.item.content.map((part) => part.text).join(" ");
    },
    "response.created"(event) {
      this.turn(event.response.id).answer.classList.add("pending");
      $("canvas").classList.remove("withheld");
    },
    "response.draft"(event) {
      this.counters.drafts += 1;
      this.latestDraft = event;
      requestAnimationFrame(() => this.drawDraft());
    },
    "response.text.done"(event) {
      const turn = this.turn(event.response_id);
      turn.answer.textContent = event.text;
      turn.answer.classList.remove("pending");
      // Too unsure to say it: the model's own answer, marked as not said (dim, style.css).
      const sure = describeConfidence(event.confidence);
      turn.withheld.textContent = event.withheld ? `not said${sure ? `, ${sure}` : ""}: ${event.withheld}` : "";
      turn.article.dataset.confidence = event.confidence ?? "";
      $("canvas").classList.toggle("withheld", Boolean(event.withheld)); // its draft, dimmed
    },
    "response.audio.delta"(event) {
      const samples = decodePcm16(event.delta);
      this.counters.audioSamples += samples.length;
      this.firstAudioAt ??= performance.now();
      if (this.player) this.player.play(samples, this.session.output_sample_rate);
      this.publish();
    },
    "response.done"(event) {
      const { timings, status } = event.response;
      const turn = this.turn(event.response_id);
      turn.answer.classList.remove("pending");
      if (status === "cancelled") turn.answer.classList.add("cancelled");
      turn.meta.textContent = [describeTimings(timings), describeConfidence(turn.article.dataset.confidence)]
        .filter(Boolean)
        .join(" · ");
      const heard = this.askedAt !== null && this.firstAudioAt !== null ? this.firstAudioAt - this.askedAt : null;
      $("latency").textContent = [
        describeTimings(timings),
        heard !== null ? `first audio ${Math.round(heard)} ms after asking, network included` : "",
      ].filter(Boolean).join(" · ");
    },
    error(event) {
      this.showError(event.error.hint ? `${event.error.message} (${event.error.hint})` : event.error.message);
    },
  };

  // -------------------------------------------------------------- drawing

  /** The latest draft only: steps that come faster than frames are collapsed. */
  drawDraft() {
    const draft = this.latestDraft;
    if (!draft) return;
    this.latestDraft = null;
    const canvas = $("canvas");
    canvas.replaceChildren(...draftSpans(draft.text));
    $("step").textContent = `step ${draft.step} of ${draft.total_steps} · ${draft.masked} masked`;
    $("progress-bar").style.width = `${(100 * draft.step) / draft.total_steps}%`;
    this.counters.drawn += 1;
    this.publish();
  }

  /** The elements of turn N ("item_N" or "resp_N"), made on first use: the question, the
   * answer said, the answer withheld (empty unless the model was too unsure), the figures. */
  turn(id) {
    const number = id.split("_").pop();
    let article = document.querySelector(`#conversation [data-turn="${number}"]`);
    if (!article) {
      article = document.createElement("article");
      article.className = "turn";
      article.dataset.turn = number;
      for (const part of ["user", "answer", "withheld", "meta"]) {
        const element = document.createElement("p");
        element.className = part;
        article.append(element);
      }
      $("conversation").append(article);
    }
    article.scrollIntoView({ block: "end" });
    const [user, answer, withheld, meta] = article.children;
    return { article, user, answer, withheld, meta };
  }

  setState(state) {
    document.body.dataset.state = state;
  }

  status(text) {
    $("status").textContent = text;
  }

  showError(text) {
    const box = $("error");
    box.textContent = text;
    box.hidden = false;
    clearTimeout(this.errorTimer);
    this.errorTimer = setTimeout(() => (box.hidden = true), 8000);
  }

  publish() {
    for (const [name, value] of Object.entries(this.counters)) document.body.dataset[name] = value;
  }
}

/** Runs of masked and written characters as spans, masked ones styled apart. */
function draftSpans(text) {
  const spans = [];
  for (const run of text.match(new RegExp(`${MASK}+|[^${MASK}]+`, "g")) ?? []) {
    const span = document.createElement("span");
    span.className = run[0] === MASK ? "masked" : "written";
    span.textContent = run;
    spans.push(span);
  }
  return spans;
}

/** "confidence 0.41", rounded down (an answer withheld below 0.92 never reads 0.92);
 * "" when there is none. */
function describeConfidence(confidence) {
  if (confidence === null || confidence === undefined || confidence === "") return "";
  return `confidence ${(Math.floor(Number(confidence) * 100) / 100).toFixed(2)}`;
}

function describeTimings(timings) {
  const parts = [
    ["voice to voice", timings.voice_to_voice_ms],
    ["transcript", timings.transcript_ms],
    ["engine", timings.engine_ms],
    ["first audio", timings.first_audio_ms],
  ];
  return parts
    .filter(([, ms]) => ms !== null && ms !== undefined)
    .map(([name, ms]) => `${name} ${Math.round(ms)} ms`)
    .join(" · ");
}

window.booth = new Booth();
