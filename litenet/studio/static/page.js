// `litenet studio`'s page: the widget module rendered with a model that speaks anywidget's methods over a
// WebSocket to the Python side. A dropped connection (the server restarted, the laptop slept) is retried
// every second; once back, the page asks for the whole state again, so nothing is lost.
import widget from "/studio.js";

class SocketModel {
  constructor(onConnection) {
    this.handlers = [];
    this.pending = [];
    this.onConnection = onConnection;
    this.opened = false;
    this.connect();
  }

  connect() {
    const ws = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/ws`);
    ws.onopen = () => {
      if (this.opened) this.pending.unshift({type: "hello"});  // a reconnection: the state again
      this.opened = true;
      this.onConnection(true);
      for (const message of this.pending.splice(0)) ws.send(JSON.stringify(message));
    };
    ws.onmessage = (event) => {
      const message = JSON.parse(event.data);
      for (const handler of this.handlers) handler(message, []);
    };
    ws.onclose = () => {
      this.onConnection(false);
      setTimeout(() => this.connect(), 1000);
    };
    this.ws = ws;
  }

  send(message) {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(message));
    else this.pending.push(message);
  }

  on(event, handler) {
    if (event === "msg:custom") this.handlers.push(handler);
  }

  off(event, handler) {
    this.handlers = this.handlers.filter((h) => h !== handler);
  }

  get() { return undefined; }
  set() {}
  save_changes() {}
}

const banner = document.getElementById("connection");
const model = new SocketModel((connected) => {
  banner.hidden = connected;
  banner.textContent = connected ? "" : "The Studio's Python side is not answering; reconnecting… (is `litenet studio` still running?)";
});
widget.render({model, el: document.getElementById("studio")});
