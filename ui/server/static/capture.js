// The microphone's AudioWorklet: whatever rate the audio context runs at, it posts
// 20 ms chunks of 16 kHz mono PCM16 (the protocol's input) to the page.
//
// Resampling averages the input samples that fall inside each output sample's span
// (a box filter): cheap, and enough low-pass for speech going to Whisper.

const OUTPUT_RATE = 16000;
const CHUNK = OUTPUT_RATE / 50; // 20 ms

class Capture extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / OUTPUT_RATE; // input samples per output sample
    this.position = 0; // input samples into the current output sample
    this.sum = 0;
    this.count = 0;
    this.chunk = new Int16Array(CHUNK);
    this.filled = 0;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (!channel) return true; // no input yet (or the track ended): stay alive
    for (let i = 0; i < channel.length; i++) {
      this.sum += channel[i];
      this.count += 1;
      this.position += 1;
      if (this.position >= this.step) {
        this.position -= this.step;
        this.emit(this.sum / this.count);
        this.sum = 0;
        this.count = 0;
      }
    }
    return true;
  }

  emit(sample) {
    const clipped = Math.max(-1, Math.min(1, sample));
    this.chunk[this.filled++] = Math.round(clipped * 32767);
    if (this.filled === CHUNK) {
      this.port.postMessage(this.chunk.buffer, [this.chunk.buffer]);
      this.chunk = new Int16Array(CHUNK);
      this.filled = 0;
    }
  }
}

registerProcessor("quicksilver-capture", Capture);
