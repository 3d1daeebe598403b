"""The phrases the offline classifier reads, per category, in English, Spanish, French, German, Portuguese, Italian,
Dutch and Polish.

Every pattern is written in the folded form `fold` gives a text (lower case, accents and ł/ß/æ/ø spelled out in
ASCII, blanks as one space), so one pattern covers "désinscrire", "desinscrire" and "DÉSINSCRIRE".
Patterns are plain alternations with bounded gaps: none backtracks over more than a few dozen characters.
"""

import re
import unicodedata

_SPELLED = str.maketrans({"ł": "l", "Ł": "l", "ß": "ss", "æ": "ae", "ø": "o", "đ": "d", "’": "'", "‘": "'", "´": "'"})


def fold(text: str) -> str:
    """`text` lower-cased, without accents, its blanks as single spaces: the form every pattern here is written in."""
    decomposed = unicodedata.normalize("NFKD", text.translate(_SPELLED).lower())
    return " ".join("".join(c for c in decomposed if not unicodedata.combining(c)).split())


def _any(*alternatives: str) -> re.Pattern[str]:
    """One expression for the alternatives, tried only where a word starts: at any other place the search moves on
    after one test instead of trying every phrase (five times fewer tries in prose)."""
    return re.compile(r"\b(?:" + "|".join(f"(?:{alternative})" for alternative in alternatives) + ")")


_GAP = r"[^.!?\n]{0,40}"  # a few words within one sentence

BOUNCE_SUBJECT = _any(
    r"undeliver|undelivered mail|returned mail|return(ed)? to sender|delivery status notification|"
    r"delivery (has )?fail|delivery failure|mail delivery fail|failure notice|failed delivery|message not delivered|"
    r"could not (be )?deliver|delivery notification|non-delivery|nondelivery|not delivered|delivery problem|"
    r"warning: could not send|mail system error",
    r"unzustellbar|nicht zustellbar|unzustellbare|zustellung fehlgeschlagen|non remis|non distribu|"
    r"echec de (la )?remise|"
    r"no se (puede|pudo) entregar|mensaje no entregado|no entregado|notificacion de estado de entrega|"
    r"nao (foi possivel )?entreg|mensagem nao entregue|falha na entrega|impossibile recapitare|non recapitabile|"
    r"mancato recapito|onbestelbaar|niet (af)?geleverd|kan niet worden bezorgd|niedostarcz|nie (mozna|"
    r"mogla) dostarczyc|"
    r"недоставлен|не доставлен|не удалось доставить")
BOUNCE_SENDER = re.compile(r"^(?:mailer-daemon|postmaster|post_master|mail-daemon|mail-delivery-subsystem|mdaemon|"
                           r"mailerdaemon|bounce[s]?|bounce-notification|nobody-bounces)@|mail delivery (system|subsystem)")
BOUNCE_TEXT = _any(
    r"could ?n[o']t be delivered|could not (be )?deliver|was ?n[o']t delivered|wasn't delivered|not (been )?delivered|"
    r"delivery (to the following recipients? )?(has )?failed|undeliverable|permanent (error|failure|fatal)|"
    r"user unknown|unknown user|mailbox (unavailable|not found|is full|full|does not exist|disabled)|"
    r"address (not found|rejected|couldn't be found)|recipient address rejected|no such (user|recipient|mailbox)|"
    r"does ?n[o']t exist|message (was )?not delivered|returned mail|delivery status notification|diagnostic-code|"
    r"action: failed|status: 5\.\d|\b5[45]\d[ -]5\.\d\.\d|this is the mail system at host|"
    r"mail delivery (failed|subsystem|system|software)|delivery has failed|couldn't be found|"
    r"the following (address|recipient)(es|s)? (had|failed)|i'm sorry to have to inform you|message could not be sent|"
    r"the email account that you tried to reach",
    r"konnte nicht zugestellt|nicht zugestellt|unzustellbar|empfanger (ist )?unbekannt|n'a pas pu etre (remis|delivre)|"
    r"non remis|adresse (introuvable|inconnue)|no se (pudo|puede) entregar|destinatario (desconocido|no existe)|"
    r"nao (pode|pôde|foi possivel)( ser)? entreg|nao foi entregue|non (e stato|e possibile) recapit|"
    r"non e stato consegnato|"
    r"impossibile recapitare|kon niet (worden )?(afgeleverd|bezorgd)|onbestelbaar|nie (mogla|mozna|moze)( zostac)? "
    r"dostarcz|niedostarcz|не (может быть |удалось |был[оа]? )?доставлен")

AUTO_SUBJECT = _any(
    r"^(auto|automatic|automated)[ :-]|auto(matic|matische|matico|matica)?[ -]?(reply|response|antwort|risposta|"
    r"respuesta|resposta|antwoord|odpowiedz)|autorespon|autoreply|out of (the )?office|abwesenheit|reponse automatique|"
    r"absence|ausencia|fuera de (la )?oficina|fora do escritorio|fuori ufficio|afwezig|nieobecnosc|"
    r"odpowiedz automatyczna|"
    r"automatyczna odpowiedz|autoresposta|accuse de reception|eingangsbestatigung|ontvangstbevestiging|"
    r"request received|ticket|we received|thanks for contacting|автоответ|on vacation|on holiday|urlaub|vacaciones|"
    r"ferias|ferie|vakantie|urlop")
OUT_OF_OFFICE = _any(
    r"out of (the )?office|\booo\b|on (vacation|holiday|holidays|annual leave|leave|pto|parental leave|maternity leave|"
    r"paternity leave|sick leave|sabbatical|a business trip)|away (from (the|my) (office|desk)|until|on (leave|"
    r"vacation|holiday)"
    r"|returning)|(i will|i'll|i will be) (be )?(back|returning|return)|returning (to the office )?on|"
    r"back in the office|"
    r"limited access to (e-?mail|email|my email)|(currently|i am|i'm) (away|traveling|travelling|out)|"
    r"be traveling|be travelling|(i am|i'm) (off|away) (until|till|from)|annual leave|upon my return",
    r"fuera de (la )?oficina|de vacaciones|(estoy|estare) ausente|estare de vuelta|(regresare|volvere|me reincorporo)|"
    r"a mi (regreso|vuelta)|de permiso",
    r"absent(e)? du bureau|(suis|serai) absent|en conge|en vacances|(serai|suis) de retour|de retour le|hors du bureau|"
    r"en deplacement|a mon retour",
    r"nicht im buro|ausser haus|abwesen|im urlaub|in urlaub|wieder (im buro|erreichbar|da|zuruck)|zuruck am|"
    r"ab (dem |den )?\d{1,2}\.\d{0,2}\.?\d{0,4} wieder|nach meiner ruckkehr",
    r"fora do escritorio|de ferias|(estou|estarei) ausente|estarei de volta|(retorno|volto|retornarei|"
    r"regresso) (no dia|em|a|dia)|"
    r"ao meu retorno|no meu regresso",
    r"fuori (ufficio|sede)|in ferie|(sono|saro) assente|saro di ritorno|rientrero|di rientro|al mio rientro",
    r"afwezig|niet op kantoor|met vakantie|op vakantie|ben (weer )?terug|weer (aanwezig|bereikbaar|op kantoor)|"
    r"met verlof",
    r"poza biurem|na urlopie|nieobecn|wracam|bede (dostepn|z powrotem|ponownie)|po powrocie")
AUTO_TEXT = _any(
    r"this is an? (automated|automatic|auto-generated)|automatically generated|auto-?generated|automated (response|"
    r"message|reply)|"
    r"automatic (reply|response|message)|do not reply|please don't reply|not monitored|no longer monitored|"
    r"we (have )?received your (message|request|email|e-mail|inquiry|enquiry)|your request has been (logged|received)|"
    r"thank you for contacting|thanks for contacting|ticket (#|number|no)",
    r"mensaje automatico|respuesta automatica|hemos recibido (su|tu)|le responderemos|este es un mensaje automatico",
    r"reponse automatique|message automatique|nous avons bien recu|merci de ne pas (y )?repondre",
    r"automatisch (generiert|erstellt|e antwort)|automatische (nachricht|antwort)|wir haben ihre [^.]{0,30}erhalten|"
    r"melden uns in kurze|eingangsbestatigung",
    r"mensagem automatica|resposta automatica|recebemos (a )?sua|responderemos em breve",
    r"messaggio automatico|risposta automatica|abbiamo ricevuto|si prega di non rispondere|risponderemo",
    r"automatisch (gegenereerd|bericht|antwoord)|we nemen (zo snel mogelijk )?contact met u op|ontvangstbevestiging",
    r"wiadomosc automatyczna|automatyczna (odpowiedz|wiadomosc)|dziekujemy za (wiadomosc|kontakt)|odpowiemy|"
    r"prosimy (na nia )?nie odpowiadac")

UNSUBSCRIBE = _any(
    r"unsubscribe|remove me|remove my (e-?mail|address|name)|take me off|opt (me )?out|stop (e-?mailing|contacting|"
    r"sending|"
    r"writing|messaging|spamming)|do not (contact|e-?mail|write to) me|don't (contact|e-?mail|write to|send me)|"
    r"no (more|further) (e-?mails|emails|messages)|this is spam|stop the spam|reported (as|you for) spam|"
    r"never (e-?mail|contact) me|off (your|the) (mailing )?list|delete my (data|e-?mail|address)",
    r"da(r)?(me|nos)? de baja|darme de baja|eliminar(me)? de|quitar(me)?(me)? de (la|su|vuestra) lista|"
    r"no me (escriban|escribas|envien|envies|contacten|contactes|manden|mandes)|borrar(me)? de|no quiero recibir",
    r"desinscri|desabonn|retirez[- ]moi|ne plus m'?(ecrire|envoyer|contacter|solliciter)|ne m'?(ecrivez|envoyez|"
    r"contactez) plus|"
    r"supprimez[- ]moi|rayez[- ]moi|supprimer (mon|mes) (adresse|coordonnees)",
    r"abmelden|austragen|aus (ihrem|dem|eurem|ihrer) (verteiler|liste|newsletter)|keine (weiteren )?(e-?mails|"
    r"nachrichten|mails)|"
    r"nicht mehr (kontaktieren|anschreiben|schreiben|zusenden)|loschen sie (mich|meine)|unerwunschte werbung",
    r"descadastr|remov(a|er) (o )?meu|remova-me|me (remova|remover|retire|retirem)|nao (me )?(envie|mande)(m)? mais|"
    r"cancelar (a )?(minha )?inscricao|sair da (sua )?lista|tirem-me",
    r"cancella(mi|rmi|te il mio)|rimuover(mi|e il mio)|rimuovetemi|non scrivetemi|non (mi )?(inviate|mandate|"
    r"contattate|scrivete) piu|"
    r"disiscri",
    r"uitschrijven|afmelden|haal (mij|me) (van|uit)|verwijder (mij|me|mijn)|geen (e-?mails|mails|berichten) meer|"
    r"niet meer (mailen|e-?mailen|benaderen|contacteren|ontvangen)",
    r"wypisz|wypisac|wypiszcie|usun(ac|cie)? (moj|mnie)|usuniecie (mojego|mnie)|nie (wysylac|wysylajcie|przysylac|"
    r"przysylajcie|piszcie|pisac) (mi|do mnie)|rezygnuje z|to jest spam|\bspam\b",
    r"how did you get my (address|e-?mail|email|details)|don't (write|email) (again|anymore)|"
    r"arretez de m'?(envoyer|ecrire|contacter)|basta (e-?mail|mail|messaggi)|stop sending|"
    r"deja de (escribirme|enviarme)|dejen de (escribirme|enviarme)|horen sie auf,? mir|nie zycze sobie|"
    r"non voglio (piu )?ricevere|ne (veux|souhaite) plus recevoir")
NOT_INTERESTED = _any(
    r"not interested|no interest|no thanks|no,? thank you|not a (good |great )?fit|not a priority|(we're|we are|i'm|"
    r"i am) (all )?set\b|"
    r"happy with (our|the|my) (current|existing|present)|already (have|use|using|work with|working with|got)|"
    r"not at this (time|moment|point)|no need for|(don't|do not|doesn't|does not) (need|have a need|have budget)|"
    r"pass on this|(we'll|we will|i'll|i will) pass|not looking for|no budget|not for us|locked in|not relevant for us|"
    r"isn't a priority|is not a priority|please don't follow up",
    r"no (nos|me) interesa|no estamos interesad|no estoy interesad|ya (tenemos|contamos con|usamos|trabajamos con)|"
    r"no es (el )?momento|no,? gracias|no necesitamos|no es prioridad",
    r"pas interess|ne (nous|m') interesse pas|non,? merci|(avons|ai) deja (un|une|notre)|deja equipe|"
    r"pas (le )?(bon )?moment|"
    r"pas besoin|pas pour nous|pas une priorite",
    r"kein(en)? (interesse|bedarf)|nicht interessiert|(haben|nutzen) (bereits|schon)|nein,? danke|zur zeit nicht|"
    r"derzeit nicht|passt nicht|keine prioritat",
    r"nao (temos|tenho) interesse|nao (nos|me) interessa|nao estamos interessad|ja (temos|usamos|utilizamos|"
    r"trabalhamos com)|"
    r"nao,? obrigad|no momento nao|nao e prioridade",
    r"non (ci|mi) interessa|non siamo interessat|non sono interessat|abbiamo gia|no,? grazie|non e il momento|"
    r"non e una priorita",
    r"geen interesse|niet geinteresseerd|nee,? bedankt|(we )?hebben al|niet nodig|geen behoefte|geen prioriteit",
    r"nie (jestesmy|jestem) zainteresowan|nie,? dziekuje|nie potrzebujemy|mamy juz|nie jest to priorytet",
    r"built (this|it|our own|one) in-house|\bso no\b|stick with what we have|we'll stick with|"
    r"(ahora mismo|de momento|por ahora|por el momento) no|no es algo que (estemos|buscamos)|na razie nie|"
    r"maybe next year|not right now|aktuell kein thema|kein thema fur uns|op dit moment niet|nao e o momento|"
    r"not the right time|pas le bon moment|no es buen momento")
WRONG_PERSON = _any(
    r"wrong (person|contact|address|guy|department)|not the right (person|contact|one)|(not|isn't) (my|the right) "
    r"(area|department|role|team|responsibility)|i (don't|do not) (handle|deal with|manage|work on|look after|own)|"
    r"not responsible for|no longer (work|with|at|employed)|(i|i've) left (the company|[a-z0-9&.-]{1,40} in|"
    r"[a-z0-9&.-]{1,40} last)|"
    r"not (involved|in charge)",
    r"persona (equivocada|indicada|adecuada|correcta)|equivocado de (persona|contacto)|no (soy|es) (yo )?(quien|"
    r"la persona)|"
    r"no me corresponde|no me (encargo|ocupo)|ya no trabajo",
    r"(pas|plus) la bonne personne|trompe de (personne|destinataire|contact)|pas (moi|mon domaine|de mon ressort)|"
    r"ne m'occupe pas|ne (suis|travaille) plus",
    r"nicht (der|die) richtige|nicht zustandig|falsch(e|en)? (person|ansprechpartner|kontakt)|bei mir (leider )?falsch|"
    r"nicht mehr (bei|im unternehmen|in der firma)",
    r"(a|sou) pessoa (certa|correta|responsavel|indicada)|pessoa errada|nao sou (eu )?(quem|a pessoa)|nao cuido|"
    r"nao trabalho mais",
    r"persona giusta|persona sbagliata|non mi occupo|non lavoro piu|non sono io",
    r"(verkeerde|juiste) persoon|niet de juiste|ga (ik )?niet over|werk (hier )?niet meer",
    r"nie do mnie|(niewlasciw|wlasciw)\w{0,3} osob|nie zajmuje sie|nie pracuje juz|nie jestem wlasciw",
    r"(just|only) an intern|no say in|not (the|a) decision[- ]maker|not my (call|decision)|"
    r"nicht mehr bei (der|dem|ihrer)|arbeite [^.!?\n]{0,20}nicht mehr|ho cambiato azienda|non sono piu il referente|"
    r"ne travaille plus|not my department|werk hier niet meer")
REFERRAL = _any(
    r"(reach out|talk|speak|write|get in touch|connect) (to|with)|(please )?(contact|email|e-mail|ask|try|ping) [a-z]+|"
    r"you'll want to (speak|talk)|(i'd|i would) suggest (talking|reaching|speaking|contacting)|my colleague|"
    r"our (head|cto|ceo|cfo|coo|vp|director|manager|cmo|cio)|cc'?ing|copying (in )?[a-z]+|loop(ing)? in|"
    r"(handles|owns|runs|leads) (this|our|that)|in charge of (this|that)|is the (right|best) (person|contact)|"
    r"forwarded (this|your email) to",
    r"contact(a|e|ar|en) (a|con)|escribele|escribe a|hable con|habla con|mi compan|lo lleva|se encarga|"
    r"te recomiendo (contactar|escribir|hablar)",
    r"contactez|ecrivez a|ma collegue|mon collegue|s'en occupe|mets en (relation|contact)|adressez[- ]vous|"
    r"voyez avec|en charge",
    r"wenden sie sich|kontaktieren sie|mein(en|e|em)? kolleg|zustandig ist|ansprechpartner(in)? ist|leite (das|ihre)",
    r"fale com|quem cuida|entre em contato com|(meu|minha) colega|responsavel e|procure (o|a)",
    r"se ne occupa|(mio|mia) collega|contatti|contattare|metto in contatto|scriva a|scrivete a|rivolgersi",
    r"neem contact op met|contact opnemen met|mijn collega|gaat hierover|mail (naar|met)",
    r"skontaktowac z|skontaktuj sie z|napisac do|napisz do|kolezank|kolega|kolege|zajmuje sie tym|odpowiada za",
    r"cc'?d (him|her|them)|i've (cc|copied)|handles (vendor|purchasing|procurement)|"
    r"bij (onze|de) [a-z]{3,30}afdeling|zustandig ist|habla con [a-z]+ de|best person for this is")
MEETING = _any(
    r"let's (talk|chat|meet|connect|set|schedule|do|find|book|hop|jump)|set up (a|some)|schedule (a|some|time)|"
    r"book(ed)? (a|time|some)|happy to (jump|hop|meet|chat|talk|connect)|(can|could|shall) we (do|meet|talk|chat|"
    r"schedule|set|hop)|"
    r"how about (monday|tuesday|wednesday|thursday|friday|next|tomorrow|\d)|works for me|send (me )?(an|the|"
    r"a calendar) invite|"
    r"grab (a|some) (time|slot)|calendly|my calendar|your (calendar )?link|(free|available) (on|at|next|this|"
    r"tomorrow|monday|"
    r"tuesday|wednesday|thursday|friday)|(a|quick|short|15|30|20)[ -]?(min(ute)?s?)? (call|demo|meeting|chat)",
    r"(agendar|programar|tener|hacer|organizar) (una|la) (reunion|llamada|demo|videollamada)|hablemos|"
    r"podemos (hablar|quedar|vernos|"
    r"tener una)|te (mando|envio) una invitacion|tienes disponibilidad|(una|la) (reunion|llamada|demo) el",
    r"(organisons|prevoir|planifier|fixer|caler) (un|une) (appel|rendez-vous|reunion|echange|visio|point)|"
    r"volontiers pour un|"
    r"(un|une) (appel|rendez-vous|echange|visio) (le |la semaine|mardi|lundi|mercredi|jeudi|vendredi|demain)|"
    r"disponible (mardi|lundi|mercredi|jeudi|vendredi|demain|la semaine)",
    r"termin (vereinbaren|ausmachen|finden)|einen termin|telefonieren|(ein|kurzes) (gesprach|telefonat|call|meeting)|"
    r"passt (ihnen|dir|es) (am|der|montag|dienstag|mittwoch|donnerstag|freitag)",
    r"(marcar|agendar) (uma|a) (reuniao|call|chamada|conversa)|vamos (agendar|marcar|conversar)|podemos (marcar|"
    r"agendar|conversar)",
    r"fissiamo|(organizzare|fissare) (una|la) (call|chiamata|riunione)|(una|la) (call|chiamata|riunione) (giovedi|"
    r"lunedi|martedi|"
    r"mercoledi|venerdi|domani)|sentirci",
    r"afspraak (inplannen|maken)|laten we (een afspraak|bellen|afspreken)|even bellen|(een )?(gesprek|meeting|"
    r"call) inplannen",
    r"(umowmy|umowic) sie|spotkanie w|porozmawiam|porozmawiajmy|zadzwon",
    r"(call|ring|phone) me\b|give me a (call|ring)|llamame|llameme|appelez[- ]moi|appelle[- ]moi|rufen sie mich|"
    r"ruf mich|me liga|me ligue|liga[- ]me|chiamami|mi chiami|bel me|belt u mij|zadzwon do mnie|prosze o telefon|"
    r"(teams|zoom|meet|webex) link|(on|to) my calendar|pick (a|one) (time|slot)|times next week|"
    r"(hablamos|quedamos|nos vemos) el|(kurz|gerne) telefonieren")
INTERESTED = _any(
    r"\binterest(ed|ing)\b|tell me more|learn more|more (info|information|details)|send (me |us )?(more|details|"
    r"info|a deck|the deck|"
    r"a case study|over|some)|sounds (good|great|promising|interesting)|keep me posted|(i'd|i would) (love|"
    r"like) to (learn|hear|know|see)|"
    r"(we've|we have) been looking for|share (a|the|your) (deck|brochure|case)",
    r"me interesa|nos interesa|interesante|cuentame mas|mas (informacion|detalles)|suena (bien|interesante)|enviame|"
    r"envienme",
    r"interessant|interesse|en savoir plus|plus d'(informations?|infos?)|envoyez[- ]moi|brochure|documentation",
    r"interessant|interesse|mehr (erfahren|informationen|infos)|unterlagen|klingt (gut|spannend|interessant)|"
    r"(schicken|senden) sie (mir|uns)",
    r"(tenho|temos) interesse|interessante|saber mais|mais (detalhes|informacoes)|(envie|enviar|mande)(-me)? mais",
    r"mi interessa|ci interessa|interessante|saperne di piu|maggiori (informazioni|dettagli)|materiale|mandatemi|"
    r"inviatemi",
    r"interessant|interesse|meer (weten|informatie)|stuur (me|mij)|klinkt (goed|interessant)",
    r"zainteresowan|ciekawie|wiecej (informacji|szczegolow)|szczegoly|prosze o (wiecej|przeslanie)|przeslac",
    r"timing is (actually )?(good|right)|reviewing (vendors|options|solutions)|what would [a-z]{2,20} look like|"
    r"worth a (look|chat)|could be (of )?interest|might be (of )?interest|gardons (le )?contact|keep in touch|"
    r"peut nous interesser|pode nos interessar|potrebbe interessar|konnte (fur uns )?interessant|grundsatzlich spannend|"
    r"manda (um|o) material|curti|wyglada ciekawie|prosze o oferte|send (me |us )?(a |an )?(proposal|quote|overview|pricing)|"
    r"(schicken|senden) sie (mal )?(eine|ein|mir)")
QUESTION = _any(
    r"how (much|many|does|do|is|long)|pricing|price|cost|do you (support|have|offer|integrate|work)|does (it|this|"
    r"your)|"
    r"is there|can (it|you|i)|where (is|are|do)|what('s| is| are| does)|which|integrat",
    r"cuanto|precio|tienen|hay (una|un)|cual", r"quel(le)?s? |combien|est-ce que|avez-vous|tarif|compatible",
    r"wie (viel|hoch|lange|funktioniert)|gibt es|kosten|preis|wo werden|welche",
    r"quanto|preco|(voces|vcs) (tem|tem|oferecem)|qual",
    r"quanto|avete|costo|prezzo|quale",
    r"wat kost|werkt (dit|het)|hebben jullie|prijs|welke",
    r"\bile\b|czy (macie|jest|mozna)|cena|koszt")

# a few common words per language: enough to tell the languages read here from the ones that are not
STOPWORDS = {
    "en": "the and you for this that with are not our your will can have thanks thank please we is it me my i",
    "es": "el la los las que de y en por para con una un gracias no es su mi nos estoy hola",
    "fr": "le la les des et est pour vous nous une un merci pas je suis avec de bonjour",
    "de": "der die das und ist nicht wir sie ich mit fur ein eine danke bitte uns ihr hallo",
    "pt": "o a os as que de e em para com uma um obrigado nao voces sua meu ola estou",
    "it": "il la che di e per con una un grazie non sono siamo mi ci della buongiorno",
    "nl": "de het een en is niet wij we ik met voor van bedankt graag u jullie hoi",
    "pl": "i w na nie jest sie z do prosze dziekuje jestem to o za dzien dobry czy jak mamy macie",
}
OTHER_STOPWORDS = {  # Latin-script languages not read here: a reply in one of them is `unknown`
    "sv": "och att det som jag inte med for tack hej vecka",
    "da": "og at det som jeg ikke med for tak hej uge",
    "tr": "ve bir bu ile icin tesekkurler merhaba size ekibimle",
    "fi": "ja on ei se kiitos viestista asiaan palaan",
    "cs": "a je se na ze to dekuji zpravu ozvu pristi",
    "hu": "es az hogy nem koszonom atnezem jelentkezem",
    "ro": "si de la nu cu multumesc revin raspuns",
}
